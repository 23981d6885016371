// NcclKvTransport between two GPUs of this machine: writer on device 0, owner on device 1, the
// connect hook calling the owner's AcceptConnection directly (what the ConnectKv RPC does between
// nodes). NCCL cannot put both ranks on one GPU: these tests skip with fewer than 2 devices.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/transport/cuda/nccl_transport.h"
#include "tests/common/transport/cuda/cuda_transport_test_util.h"
#include "tests/common/transport/cuda/gpu_transport_test_util.h"
#include "tests/common/transport/transport_test_util.h"

namespace tandem {
namespace {

using testing::DevicePool;
using testing::FillRandom;
using testing::Inbox;
using testing::Result;
using testing::TargetOf;

TEST(NcclKvTransportGpuTest, CreateFailsCleanlyWithoutTheDevice) {
  int count = 0;
  NcclKvTransportOptions o;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    EXPECT_FALSE(NcclKvTransport::Create(o).ok());  // no GPU (CI): a Status, not a crash
    return;
  }
  o.cuda_device = count;  // refused before NCCL is looked for
  const absl::Status status = NcclKvTransport::Create(o).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

struct NcclPair {
  std::unique_ptr<NcclKvTransport> owner;
  std::unique_ptr<NcclKvTransport> writer;
  std::shared_ptr<std::atomic<int>> connects = std::make_shared<std::atomic<int>>(0);
};

NcclPair MakePair(absl::Status hook_error = absl::OkStatus()) {
  NcclPair p;
  NcclKvTransportOptions oo;
  oo.cuda_device = 1;
  oo.address = "owner-node:50061";
  auto owner = NcclKvTransport::Create(oo);
  EXPECT_TRUE(owner.ok()) << owner.status();
  if (!owner.ok()) return p;
  p.owner = std::move(*owner);
  NcclKvTransportOptions wo;
  wo.cuda_device = 0;
  wo.connect_timeout = absl::Seconds(60);
  NcclKvTransport* raw_owner = p.owner.get();
  std::shared_ptr<std::atomic<int>> connects = p.connects;
  wo.connect = [raw_owner, connects, hook_error](const std::string& address, const std::string& id,
                                                 uint64_t incarnation, absl::Time) -> absl::Status {
    connects->fetch_add(1);
    if (!hook_error.ok()) return hook_error;
    if (address != "owner-node:50061") return absl::NotFoundError(address);
    return raw_owner->AcceptConnection(id, incarnation);
  };
  auto writer = NcclKvTransport::Create(wo);
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return p;
  p.writer = std::move(*writer);
  return p;
}

TEST(NcclKvTransportGpuTest, WritesLandBeforeTheNoticeBetweenTwoGpus) {
  TANDEM_REQUIRE_CUDA_DEVICES(2);
  constexpr size_t kPool = 64 << 20;
  NcclPair p = MakePair();
  ASSERT_TRUE(p.owner && p.writer);
  DevicePool owner_pool(1, kPool), writer_pool(0, kPool);
  std::vector<char> src(kPool), expected(kPool, 0);
  FillRandom(src.data(), kPool, 21);
  writer_pool.Upload(src);
  ASSERT_TRUE(p.owner->RegisterDevicePool(owner_pool.data(), kPool, 1).ok());
  ASSERT_TRUE(p.writer->RegisterDevicePool(writer_pool.data(), kPool, 0).ok());
  std::vector<char> at_notice;
  Inbox inbox;
  p.owner->SetNoticeHandler(
      inbox.Handler([&](std::string_view) { at_notice = owner_pool.Download(); }));
  // Two rounds on one communicator: 1024 blocks of 64 KiB reversed, 8 writes a round; the second
  // round's frames push past frames_in_flight' worth of sequence numbers too.
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    constexpr size_t kBlock = 64 << 10;
    const size_t n = kPool / kBlock;
    std::vector<std::vector<KvCopy>> writes(8);
    for (size_t b = 0; b < n; ++b) {
      const size_t from = round == 0 ? b : n - 1 - b;
      KvCopy c{from * kBlock, kPool - (b + 1) * kBlock, kBlock};
      std::memcpy(expected.data() + c.dst_offset, src.data() + c.src_offset, kBlock);
      writes[b * 8 / n].push_back(c);
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    std::vector<std::unique_ptr<Result>> results;
    for (auto& copies : writes) {
      results.push_back(std::make_unique<Result>());
      p.writer->Write(TargetOf(*p.owner), copies, deadline, results.back()->Callback());
    }
    Result notice;
    p.writer->Notify(TargetOf(*p.owner), "round " + std::to_string(round), deadline,
                     notice.Callback());
    for (auto& r : results) {
      ASSERT_TRUE(r->Wait(absl::Seconds(90)));
      EXPECT_TRUE(r->status().ok()) << r->status();
    }
    ASSERT_TRUE(notice.Wait(absl::Seconds(90)));
    EXPECT_TRUE(notice.status().ok()) << notice.status();
    ASSERT_TRUE(inbox.WaitFor(round + 1, absl::Seconds(30)));
    EXPECT_EQ(inbox.payloads()[round], "round " + std::to_string(round));
    EXPECT_TRUE(at_notice == expected) << "the pool at the notice differs";
  }
  EXPECT_EQ(p.connects->load(), 1) << "one communicator for the pair";
  EXPECT_EQ(p.owner->num_connections(), 1);
  p.writer.reset();  // before the pools go
  p.owner.reset();
}

TEST(NcclKvTransportGpuTest, BadRequestsAndAFailedConnectEndWithErrors) {
  TANDEM_REQUIRE_CUDA_DEVICES(2);
  NcclPair p = MakePair(absl::UnavailableError("decode node unreachable"));
  ASSERT_TRUE(p.owner && p.writer);
  DevicePool owner_pool(1, 1 << 20), writer_pool(0, 1 << 20);
  ASSERT_TRUE(p.owner->RegisterDevicePool(owner_pool.data(), 1 << 20, 1).ok());
  ASSERT_TRUE(p.writer->RegisterDevicePool(writer_pool.data(), 1 << 20, 0).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  Result out_of_range, too_big, unreachable;
  p.writer->Write(TargetOf(*p.owner), {{0, (1 << 20) - 8, 16}}, deadline, out_of_range.Callback());
  p.writer->Notify(TargetOf(*p.owner), std::string(1 << 20, 'x'), deadline, too_big.Callback());
  p.writer->Write(TargetOf(*p.owner), {{0, 0, 4096}}, deadline, unreachable.Callback());
  for (Result* r : {&out_of_range, &too_big, &unreachable}) ASSERT_TRUE(r->Wait(absl::Seconds(30)));
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unreachable.status().code(), absl::StatusCode::kUnavailable) << unreachable.status();
  EXPECT_NE(unreachable.status().message().find("decode node unreachable"), std::string::npos);
  EXPECT_EQ(p.owner->AcceptConnection("short", 1).code(), absl::StatusCode::kInvalidArgument);
  p.writer.reset();  // before the pools go
  p.owner.reset();
}

}  // namespace
}  // namespace tandem
