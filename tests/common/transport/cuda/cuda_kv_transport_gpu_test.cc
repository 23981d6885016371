// CudaKvTransport on GPUs: the staged path between two transports in one process (CUDA forbids a
// process opening its own IPC handle, so in-process pairs always stage), and the direct CUDA IPC
// path with the owner in another process (tandem_cuda_transport_peer --copier cuda) — on one GPU
// the two processes share it. Skips without a GPU.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/transport/cuda/cuda_kv_transport.h"
#include "common/transport/cuda/cuda_memory_copier.h"
#include "common/transport/ucx_transport.h"
#include "tests/common/transport/cuda/cuda_transport_test_util.h"
#include "tests/common/transport/cuda/gpu_transport_test_util.h"
#include "tests/common/transport/transport_test_util.h"

extern "C" const char* __lsan_default_suppressions() {
  return "leak:libuct.so\nleak:libucs.so\nleak:libucp.so\n";
}

namespace tandem {
namespace {

using testing::ChildProcess;
using testing::DevicePool;
using testing::FillRandom;
using testing::Fnv1a;
using testing::FromHex;
using testing::Inbox;
using testing::Result;
using testing::TargetOf;

absl::StatusOr<std::unique_ptr<CudaKvTransport>> MakeTransport(int device,
                                                               CudaKvTransportOptions options) {
  UcxTransportOptions ucx;
  ucx.tls = "tcp";
  auto inner = UcxTransport::Create(ucx);
  if (!inner.ok()) return inner.status();
  auto copier = CudaMemoryCopier::Create(device);
  if (!copier.ok()) return copier.status();
  return CudaKvTransport::Create(std::move(*inner), std::move(*copier), options);
}

// The owner process's binary: the packed one on a GPU machine ($TANDEM_BINARY_DIR/bin/, see
// scripts/gpu/README.md), else the one this build made.
std::string PeerBinary() {
  if (const char* dir = std::getenv("TANDEM_BINARY_DIR")) {
    const std::string packed = std::string(dir) + "/bin/tandem_cuda_transport_peer";
    if (access(packed.c_str(), X_OK) == 0) return packed;
  }
  return TANDEM_CUDA_TRANSPORT_PEER;
}

int OwnerDevice() {
  int count = 0;
  cudaGetDeviceCount(&count);
  return count >= 2 ? 1 : 0;
}

// Blocks of 64 KiB scattered in reverse order over several writes; the notice after them.
std::vector<std::vector<KvCopy>> ReversedBlocks(size_t pool_bytes, size_t block, int writes,
                                                const std::vector<char>& src,
                                                std::vector<char>* expected) {
  const size_t n = pool_bytes / block;
  std::vector<std::vector<KvCopy>> out(writes);
  for (size_t b = 0; b < n; ++b) {
    KvCopy c{b * block, pool_bytes - (b + 1) * block, block};
    std::memcpy(expected->data() + c.dst_offset, src.data() + c.src_offset, block);
    out[b * writes / n].push_back(c);
  }
  return out;
}

TEST(CudaKvTransportGpuTest, StagedPathBetweenTwoTransportsInOneProcess) {
  TANDEM_REQUIRE_CUDA_DEVICES(1);
  constexpr size_t kPool = 64 << 20;
  CudaKvTransportOptions o;
  o.chunk_bytes = 1 << 20;
  o.staging_buffers = 4;
  o.landing_slots = 8;
  o.max_slots_per_transfer = 4;
  o.allow_direct = false;
  auto owner = MakeTransport(OwnerDevice(), o);
  auto writer = MakeTransport(0, o);
  ASSERT_TRUE(owner.ok()) << owner.status();
  ASSERT_TRUE(writer.ok()) << writer.status();
  DevicePool owner_pool(OwnerDevice(), kPool), writer_pool(0, kPool);
  std::vector<char> src(kPool), expected(kPool, 0);
  FillRandom(src.data(), kPool, 11);
  writer_pool.Upload(src);
  ASSERT_TRUE((*owner)->RegisterDevicePool(owner_pool.data(), kPool, OwnerDevice()).ok());
  ASSERT_TRUE((*writer)->RegisterDevicePool(writer_pool.data(), kPool, 0).ok());
  std::vector<char> at_notice;
  Inbox inbox;
  (*owner)->SetNoticeHandler(
      inbox.Handler([&](std::string_view) { at_notice = owner_pool.Download(); }));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::vector<std::unique_ptr<Result>> writes;
  for (auto& copies : ReversedBlocks(kPool, 64 << 10, 4, src, &expected)) {
    writes.push_back(std::make_unique<Result>());
    (*writer)->Write(TargetOf(**owner), copies, deadline, writes.back()->Callback());
  }
  Result notice;
  (*writer)->Notify(TargetOf(**owner), "staged", deadline, notice.Callback());
  for (auto& w : writes) {
    ASSERT_TRUE(w->Wait(absl::Seconds(70)));
    EXPECT_TRUE(w->status().ok()) << w->status();
  }
  ASSERT_TRUE(notice.Wait(absl::Seconds(70)));
  EXPECT_TRUE(notice.status().ok()) << notice.status();
  ASSERT_TRUE(inbox.WaitFor(1, absl::Seconds(10)));
  EXPECT_TRUE(at_notice == expected) << "the pool at the notice differs";
  const CudaKvTransportStats s = (*writer)->stats();
  EXPECT_EQ(s.staged_writes, 4);
  EXPECT_EQ(s.chunks_sent, static_cast<int64_t>(kPool / o.chunk_bytes));
  writer->reset();  // before the pools go
  owner->reset();
}

// The owner process has the pool; this process opens it with cudaIpcOpenMemHandle and copies
// device to device. With one GPU both processes share it.
TEST(CudaKvTransportGpuTest, DirectIpcPathToAnotherProcess) {
  TANDEM_REQUIRE_CUDA_DEVICES(1);
  constexpr size_t kPool = 64 << 20;
  ChildProcess peer({PeerBinary(), "--copier", "cuda", "--device", std::to_string(OwnerDevice()),
                     "--pool-bytes", std::to_string(kPool)});
  auto ready = peer.ReadLine(60000);
  ASSERT_TRUE(ready.has_value()) << "the peer did not start";
  std::istringstream in(*ready);
  std::string word, addr, key;
  uint64_t base = 0;
  in >> word >> addr >> key >> base;
  ASSERT_EQ(word, "READY");
  CudaKvTransportOptions o;
  auto writer = MakeTransport(0, o);
  ASSERT_TRUE(writer.ok()) << writer.status();
  DevicePool writer_pool(0, kPool);
  std::vector<char> src(kPool), expected(kPool, 0);
  FillRandom(src.data(), kPool, 12);
  writer_pool.Upload(src);
  ASSERT_TRUE((*writer)->RegisterDevicePool(writer_pool.data(), kPool, 0).ok());
  const KvTarget target{FromHex(addr), FromHex(key), base, 0};
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::vector<std::unique_ptr<Result>> writes;
  for (auto& copies : ReversedBlocks(kPool, 64 << 10, 4, src, &expected)) {
    writes.push_back(std::make_unique<Result>());
    (*writer)->Write(target, copies, deadline, writes.back()->Callback());
  }
  Result notice;
  (*writer)->Notify(target, "ipc", deadline, notice.Callback());
  for (auto& w : writes) {
    ASSERT_TRUE(w->Wait(absl::Seconds(70)));
    EXPECT_TRUE(w->status().ok()) << w->status();
  }
  ASSERT_TRUE(notice.Wait(absl::Seconds(70)));
  EXPECT_TRUE(notice.status().ok()) << notice.status();
  auto line = peer.ReadLine(30000);
  ASSERT_TRUE(line.has_value());
  std::istringstream nl(*line);
  std::string payload_hex;
  uint64_t hash = 0;
  nl >> word >> payload_hex >> hash;
  EXPECT_EQ(word, "NOTICE");
  EXPECT_EQ(FromHex(payload_hex), "ipc");
  EXPECT_EQ(hash, Fnv1a(expected.data(), kPool)) << "the owner's pool at the notice differs";
  const CudaKvTransportStats s = (*writer)->stats();
  EXPECT_EQ(s.direct_writes, 4) << "the IPC path was not taken (import failures: "
                                << s.import_failures << ")";
  EXPECT_EQ(s.imports_opened, 1);
  writer->reset();
  EXPECT_EQ(peer.CloseAndWait(), 0);
}

}  // namespace
}  // namespace tandem
