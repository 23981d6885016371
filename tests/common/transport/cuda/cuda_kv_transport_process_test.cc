// CudaKvTransport across two processes over real UCX (loopback tcp), host memory standing in for
// device memory: the owner in tandem_cuda_transport_peer, the writer here. With a shared pool the
// writer opens the owner's pool and copies directly (the CUDA IPC path's protocol); without, it
// stages through the owner's landing slots.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/transport/cuda/cuda_kv_transport.h"
#include "common/transport/cuda/host_memory_copier.h"
#include "common/transport/ucx_transport.h"
#include "tests/common/transport/cuda/cuda_transport_test_util.h"
#include "tests/common/transport/transport_test_util.h"

namespace tandem {
namespace {

using testing::ChildProcess;
using testing::FillRandom;
using testing::Fnv1a;
using testing::FromHex;
using testing::Result;

TEST(CudaKvTransportProcessTest, TwoProcessesByteExactWithNoticeAfterWrites) {
  constexpr size_t kPool = 4 << 20;
  for (bool shared : {true, false}) {
    SCOPED_TRACE(shared ? "direct" : "staged");
    std::vector<std::string> argv{TANDEM_CUDA_TRANSPORT_PEER,
                                  "--copier",
                                  "host",
                                  "--pool-bytes",
                                  std::to_string(kPool),
                                  "--chunk-bytes",
                                  std::to_string(256 << 10),
                                  "--landing-slots",
                                  "3"};
    if (shared) argv.push_back("--shared");
    ChildProcess peer(argv);
    auto ready = peer.ReadLine(20000);
    ASSERT_TRUE(ready.has_value());
    std::istringstream in(*ready);
    std::string word, addr, key;
    uint64_t base = 0;
    in >> word >> addr >> key >> base;
    ASSERT_EQ(word, "READY");

    UcxTransportOptions ucx;
    ucx.tls = "tcp";
    auto inner = UcxTransport::Create(ucx);
    ASSERT_TRUE(inner.ok()) << inner.status();
    CudaKvTransportOptions options;
    options.chunk_bytes = 256 << 10;
    options.staging_buffers = 2;
    options.landing_slots = 1;
    auto writer =
        CudaKvTransport::Create(std::move(*inner), std::make_unique<HostMemoryCopier>(), options);
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::vector<char> pool(kPool);
    FillRandom(pool.data(), kPool, 99);
    ASSERT_TRUE((*writer)->RegisterDevicePool(pool.data(), kPool, 0).ok());

    // 256 blocks of 16 KiB in reverse order, in 4 writes.
    std::vector<char> expected(kPool, 0);
    std::vector<std::unique_ptr<Result>> writes;
    KvTarget target{FromHex(addr), FromHex(key), base, 0};
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    for (int w = 0; w < 4; ++w) {
      std::vector<KvCopy> copies;
      for (int b = w * 64; b < (w + 1) * 64; ++b) {
        KvCopy c{static_cast<uint64_t>(b) * 16384, kPool - (static_cast<uint64_t>(b) + 1) * 16384,
                 16384};
        std::memcpy(expected.data() + c.dst_offset, pool.data() + c.src_offset, c.bytes);
        copies.push_back(c);
      }
      writes.push_back(std::make_unique<Result>());
      (*writer)->Write(target, std::move(copies), deadline, writes.back()->Callback());
    }
    Result notice;
    (*writer)->Notify(target, std::string("payload\x01\x02"), deadline, notice.Callback());
    for (auto& w : writes) {
      ASSERT_TRUE(w->Wait(absl::Seconds(40)));
      EXPECT_TRUE(w->status().ok()) << w->status();
    }
    ASSERT_TRUE(notice.Wait(absl::Seconds(40)));
    EXPECT_TRUE(notice.status().ok()) << notice.status();
    auto line = peer.ReadLine(20000);
    ASSERT_TRUE(line.has_value());
    std::istringstream nl(*line);
    std::string payload_hex;
    uint64_t hash = 0;
    nl >> word >> payload_hex >> hash;
    EXPECT_EQ(word, "NOTICE");
    EXPECT_EQ(FromHex(payload_hex), std::string("payload\x01\x02"));
    EXPECT_EQ(hash, Fnv1a(expected.data(), kPool));
    const CudaKvTransportStats stats = (*writer)->stats();
    if (shared) {
      EXPECT_EQ(stats.direct_writes, 4);
      EXPECT_EQ(stats.imports_opened, 1);
    } else {
      EXPECT_EQ(stats.staged_writes, 4);
      EXPECT_EQ(stats.chunks_sent, static_cast<int64_t>(kPool / (256 << 10)));
    }
    writer->reset();
    EXPECT_EQ(peer.CloseAndWait(), 0);
  }
}

// The owner process is killed mid-transfer: the writer's operations end by their deadline.
TEST(CudaKvTransportProcessTest, KilledOwnerFailsWithinTheDeadline) {
  constexpr size_t kPool = 8 << 20;
  ChildProcess peer({TANDEM_CUDA_TRANSPORT_PEER, "--copier", "host", "--pool-bytes",
                     std::to_string(kPool), "--chunk-bytes", std::to_string(64 << 10),
                     "--landing-slots", "2"});
  auto ready = peer.ReadLine(20000);
  ASSERT_TRUE(ready.has_value());
  std::istringstream in(*ready);
  std::string word, addr, key;
  uint64_t base = 0;
  in >> word >> addr >> key >> base;
  ASSERT_EQ(word, "READY");
  UcxTransportOptions ucx;
  ucx.tls = "tcp";
  auto inner = UcxTransport::Create(ucx);
  ASSERT_TRUE(inner.ok());
  CudaKvTransportOptions options;
  options.chunk_bytes = 64 << 10;
  options.staging_buffers = 2;
  options.landing_slots = 1;
  auto writer =
      CudaKvTransport::Create(std::move(*inner), std::make_unique<HostMemoryCopier>(), options);
  ASSERT_TRUE(writer.ok());
  std::vector<char> pool(kPool, 1);
  ASSERT_TRUE((*writer)->RegisterDevicePool(pool.data(), kPool, 0).ok());
  KvTarget target{FromHex(addr), FromHex(key), base, 0};
  const absl::Time start = absl::Now();
  const absl::Duration budget = absl::Seconds(4);
  Result w;
  (*writer)->Write(target, {KvCopy{0, 0, kPool}}, start + budget, w.Callback());
  peer.Kill();
  Result n;
  (*writer)->Notify(target, "done", start + budget, n.Callback());
  ASSERT_TRUE(w.Wait(budget + absl::Seconds(5))) << "write hung";
  ASSERT_TRUE(n.Wait(budget + absl::Seconds(5))) << "notice hung";
  EXPECT_FALSE(w.status().ok());
  EXPECT_FALSE(n.status().ok());
  EXPECT_LT(w.at() - start, budget + absl::Seconds(2));
  writer->reset();  // before its pool goes
}

}  // namespace
}  // namespace tandem
