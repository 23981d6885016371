#include "common/transport/ucx_transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/transport/kv_write_corruption.h"
#include "tests/common/transport/transport_test_util.h"

// UCX 1.13 keeps a few small allocations of its transport lists until exit; they are not ours.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libuct.so\nleak:libucs.so\nleak:libucp.so\n";
}

namespace tandem {
namespace {

using testing::ChildProcess;
using testing::DifferingBytes;
using testing::FillRandom;
using testing::Fnv1a;
using testing::FromHex;
using testing::ToHex;

// Collects one operation's outcome.
class Result {
 public:
  TransferDone Callback() {
    return [this](absl::Status s) {
      absl::MutexLock lock(&mu_);
      ++calls_;
      status_ = s;
      at_ = absl::Now();
    };
  }
  // Waits for the callback; false on timeout.
  bool Wait(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(
                                    +[](int* c) { return *c > 0; }, &calls_),
                                timeout);
  }
  absl::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  absl::Time at() {
    absl::MutexLock lock(&mu_);
    return at_;
  }

 private:
  absl::Mutex mu_;
  int calls_ = 0;
  absl::Status status_;
  absl::Time at_;
};

// Notices received by an owner.
class Inbox {
 public:
  NoticeHandler Handler(std::function<void(std::string_view)> also = nullptr) {
    return [this, also](std::string_view payload) {
      if (also) also(payload);
      absl::MutexLock lock(&mu_);
      payloads_.emplace_back(payload);
    };
  }
  bool WaitFor(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return payloads_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
  std::vector<std::string> payloads() {
    absl::MutexLock lock(&mu_);
    return payloads_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> payloads_;
};

// Owner (decode side) and writer (prefill side) in one process.
struct Pair {
  std::unique_ptr<UcxTransport> owner;
  std::unique_ptr<UcxTransport> writer;
  std::vector<char> owner_pool;
  std::vector<char> writer_pool;
  KvTarget target() const {
    return KvTarget{owner->address(), owner->pool_remote_key(), owner->pool_base(),
                    owner->incarnation()};
  }
};

class UcxTransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  UcxTransportOptions Options() {
    UcxTransportOptions o;
    o.tls = GetParam();
    return o;
  }

  Pair MakePair(size_t owner_bytes, size_t writer_bytes, UcxTransportOptions writer_options = {}) {
    Pair p;
    auto owner = UcxTransport::Create(Options());
    EXPECT_TRUE(owner.ok()) << owner.status();
    if (!owner.ok()) return p;
    writer_options.tls = GetParam();
    auto writer = UcxTransport::Create(writer_options);
    EXPECT_TRUE(writer.ok()) << writer.status();
    if (!writer.ok()) return p;
    p.owner = std::move(*owner);
    p.writer = std::move(*writer);
    p.owner_pool.assign(owner_bytes, 0);
    p.writer_pool.resize(writer_bytes);
    FillRandom(p.writer_pool.data(), writer_bytes, 42);
    EXPECT_TRUE(p.owner->RegisterPool(p.owner_pool.data(), owner_bytes).ok());
    EXPECT_TRUE(p.writer->RegisterPool(p.writer_pool.data(), writer_bytes).ok());
    return p;
  }
};

TEST_P(UcxTransportTest, PublishesAddressKeyAndIncarnation) {
  Pair p = MakePair(4096, 4096);
  ASSERT_TRUE(p.owner);
  EXPECT_FALSE(p.owner->address().empty());
  EXPECT_FALSE(p.owner->pool_remote_key().empty());
  EXPECT_EQ(p.owner->pool_base(), reinterpret_cast<uintptr_t>(p.owner_pool.data()));
  EXPECT_NE(p.owner->incarnation(), 0u);
  EXPECT_NE(p.owner->incarnation(), p.writer->incarnation());
  EXPECT_NE(p.owner->address(), p.writer->address());
  EXPECT_EQ(p.owner->name(), "ucx");
  EXPECT_FALSE(p.owner->RegisterPool(p.owner_pool.data(), 4096).ok());  // only once
}

// Many scattered copies of various sizes land byte-exact, and the notice sent right behind them
// (without waiting for the write) finds them all in place.
TEST_P(UcxTransportTest, ManyCopiesLandByteExactBeforeTheNotice) {
  constexpr size_t kPool = 8 << 20;
  Pair p = MakePair(kPool, kPool);
  ASSERT_TRUE(p.owner);
  std::vector<KvCopy> copies;
  std::mt19937_64 rng(7);
  // Non-overlapping destination slots of 32 KiB, each filled with a random-length prefix.
  constexpr size_t kSlot = 32 << 10;
  std::vector<size_t> slots(kPool / kSlot);
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = i;
  std::shuffle(slots.begin(), slots.end(), rng);
  std::vector<char> expected(kPool, 0);
  for (size_t i = 0; i < slots.size(); ++i) {
    KvCopy c;
    c.bytes = 1 + rng() % kSlot;
    c.src_offset = rng() % (kPool - c.bytes);
    c.dst_offset = slots[i] * kSlot;
    std::memcpy(expected.data() + c.dst_offset, p.writer_pool.data() + c.src_offset, c.bytes);
    copies.push_back(c);
  }
  uint64_t hash_at_notice = 0;
  Inbox inbox;
  p.owner->SetNoticeHandler(
      inbox.Handler([&](std::string_view) { hash_at_notice = Fnv1a(p.owner_pool.data(), kPool); }));
  // Split into several Writes in flight at once.
  std::vector<std::unique_ptr<Result>> writes;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (size_t start = 0; start < copies.size(); start += 50) {
    std::vector<KvCopy> part(copies.begin() + start,
                             copies.begin() + std::min(copies.size(), start + 50));
    writes.push_back(std::make_unique<Result>());
    p.writer->Write(p.target(), std::move(part), deadline, writes.back()->Callback());
  }
  Result notice;
  p.writer->Notify(p.target(), "all-written", deadline, notice.Callback());
  for (auto& w : writes) {
    ASSERT_TRUE(w->Wait(absl::Seconds(30)));
    EXPECT_TRUE(w->status().ok()) << w->status();
  }
  ASSERT_TRUE(notice.Wait(absl::Seconds(30)));
  EXPECT_TRUE(notice.status().ok()) << notice.status();
  ASSERT_TRUE(inbox.WaitFor(1, absl::Seconds(10)));
  EXPECT_EQ(inbox.payloads()[0], "all-written");
  EXPECT_EQ(hash_at_notice, Fnv1a(expected.data(), kPool)) << "notice overtook a write";
  EXPECT_EQ(std::memcmp(p.owner_pool.data(), expected.data(), kPool), 0);
  for (auto& w : writes) EXPECT_EQ(w->calls(), 1);
  EXPECT_EQ(notice.calls(), 1);
}

TEST_P(UcxTransportTest, EagerAndRendezvousNoticesArriveIntact) {
  for (auto protocol : {UcxTransportOptions::NoticeProtocol::kEager,
                        UcxTransportOptions::NoticeProtocol::kRendezvous,
                        UcxTransportOptions::NoticeProtocol::kAuto}) {
    UcxTransportOptions wo;
    wo.notice_protocol = protocol;
    Pair p = MakePair(4096, 4096, wo);
    ASSERT_TRUE(p.owner);
    Inbox inbox;
    p.owner->SetNoticeHandler(inbox.Handler());
    std::vector<std::string> sent;
    for (size_t size : {size_t{0}, size_t{1}, size_t{200}, size_t{70000}}) {
      std::string payload(size, '\0');
      FillRandom(payload.data(), size, size + 1);
      sent.push_back(payload);
    }
    std::vector<std::unique_ptr<Result>> results;
    for (const std::string& s : sent) {
      results.push_back(std::make_unique<Result>());
      p.writer->Notify(p.target(), s, absl::Now() + absl::Seconds(20), results.back()->Callback());
    }
    for (auto& r : results) {
      ASSERT_TRUE(r->Wait(absl::Seconds(30)));
      EXPECT_TRUE(r->status().ok()) << r->status();
    }
    ASSERT_TRUE(inbox.WaitFor(sent.size(), absl::Seconds(10)));
    std::vector<std::string> got = inbox.payloads();
    std::sort(got.begin(), got.end());
    std::sort(sent.begin(), sent.end());
    EXPECT_EQ(got, sent) << "protocol " << static_cast<int>(protocol);
  }
}

// The test hook behind the integration tests' corrupted transfers: with test_corrupt_writes = 1
// the first Write lands with exactly one byte flipped (sent from a copy: the writer's pool stays
// intact) and the next one lands clean.
TEST_P(UcxTransportTest, TestHookFlipsOneByteInFlight) {
  constexpr size_t kPool = 1 << 20;
  UcxTransportOptions writer_options;
  writer_options.test_corrupt_writes = 1;
  Pair p = MakePair(kPool, kPool, writer_options);
  ASSERT_TRUE(p.owner);
  EXPECT_EQ(p.owner->host_pool().data(), reinterpret_cast<const uint8_t*>(p.owner_pool.data()));
  const std::vector<char> source = p.writer_pool;
  const std::vector<KvCopy> copies = {{4096, 0, 100000}, {300000, 200000, 50000}};
  for (int round = 0; round < 2; ++round) {
    std::fill(p.owner_pool.begin(), p.owner_pool.end(), 0);
    Result r;
    p.writer->Write(p.target(), copies, absl::Now() + absl::Seconds(20), r.Callback());
    ASSERT_TRUE(r.Wait(absl::Seconds(30)));
    ASSERT_TRUE(r.status().ok()) << r.status();
    const std::vector<size_t> differ = DifferingBytes(p.owner_pool, p.writer_pool, copies);
    if (round == 0) {
      ASSERT_EQ(differ, std::vector<size_t>{50000});
      EXPECT_EQ(static_cast<uint8_t>(p.owner_pool[50000] ^ p.writer_pool[4096 + 50000]),
                KvByteFlip::kMask);
    } else {
      EXPECT_TRUE(differ.empty());
    }
  }
  EXPECT_EQ(p.writer_pool, source);
}

TEST_P(UcxTransportTest, SourceOutOfPoolIsInvalidArgument) {
  Pair p = MakePair(4096, 4096);
  ASSERT_TRUE(p.owner);
  Result r;
  p.writer->Write(p.target(), {KvCopy{4000, 0, 200}}, absl::Now() + absl::Seconds(5), r.Callback());
  ASSERT_TRUE(r.Wait(absl::Seconds(10)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
}

TEST_P(UcxTransportTest, PastDeadlineFailsWithoutWriting) {
  Pair p = MakePair(4096, 4096);
  ASSERT_TRUE(p.owner);
  Result r;
  p.writer->Write(p.target(), {KvCopy{0, 0, 4096}}, absl::Now() - absl::Seconds(1), r.Callback());
  ASSERT_TRUE(r.Wait(absl::Seconds(10)));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_EQ(Fnv1a(p.owner_pool.data(), 4096), Fnv1a(std::vector<char>(4096).data(), 4096));
}

// The owner transport is destroyed: writes and notices to it end with an error by the deadline.
TEST_P(UcxTransportTest, GonePeerFailsWithinTheDeadline) {
  Pair p = MakePair(1 << 20, 1 << 20);
  ASSERT_TRUE(p.owner);
  // Talk once so the endpoint exists and is cached.
  Result first;
  p.writer->Write(p.target(), {KvCopy{0, 0, 1 << 20}}, absl::Now() + absl::Seconds(10),
                  first.Callback());
  ASSERT_TRUE(first.Wait(absl::Seconds(15)));
  ASSERT_TRUE(first.status().ok()) << first.status();
  KvTarget target = p.target();
  p.owner.reset();
  const absl::Duration budget = absl::Seconds(3);
  const absl::Time start = absl::Now();
  Result w, n;
  p.writer->Write(target, {KvCopy{0, 0, 1 << 20}}, start + budget, w.Callback());
  p.writer->Notify(target, "anyone?", start + budget, n.Callback());
  ASSERT_TRUE(w.Wait(budget + absl::Seconds(5))) << "write hung";
  ASSERT_TRUE(n.Wait(budget + absl::Seconds(5))) << "notice hung";
  EXPECT_FALSE(w.status().ok());
  EXPECT_FALSE(n.status().ok());
  EXPECT_LT(w.at() - start, budget + absl::Seconds(2));
  EXPECT_LT(n.at() - start, budget + absl::Seconds(2));
  EXPECT_EQ(w.calls(), 1);
  EXPECT_EQ(n.calls(), 1);
}

TEST_P(UcxTransportTest, DestroyingTheWriterFailsPendingOperations) {
  auto peer = std::make_unique<ChildProcess>(std::vector<std::string>{
      TANDEM_UCX_PEER, "--tls", GetParam(), "--pool-bytes", "65536", "--stuck"});
  auto ready = peer->ReadLine(20000);
  ASSERT_TRUE(ready.has_value());
  std::istringstream in(*ready);
  std::string word, addr, key;
  uint64_t base = 0;
  in >> word >> addr >> key >> base;
  ASSERT_EQ(word, "READY");
  auto writer = UcxTransport::Create(Options());
  ASSERT_TRUE(writer.ok());
  std::vector<char> pool(65536, 1);
  ASSERT_TRUE((*writer)->RegisterPool(pool.data(), pool.size()).ok());
  Result r;
  (*writer)->Write(KvTarget{FromHex(addr), FromHex(key), base, 0}, {KvCopy{0, 0, 65536}},
                   absl::Now() + absl::Seconds(60), r.Callback());
  absl::SleepFor(absl::Milliseconds(200));
  writer->reset();
  ASSERT_TRUE(r.Wait(absl::Seconds(5)));
  EXPECT_FALSE(r.status().ok());
  EXPECT_EQ(r.calls(), 1);
  // Writes after the transport is gone cannot be issued at all; nothing to call here.
}

// A peer process that never progresses: writes end with DeadlineExceeded at the deadline.
TEST_P(UcxTransportTest, HungPeerProcessFailsAtTheDeadline) {
  ChildProcess peer({TANDEM_UCX_PEER, "--tls", GetParam(), "--pool-bytes", "1048576", "--stuck"});
  auto ready = peer.ReadLine(20000);
  ASSERT_TRUE(ready.has_value());
  std::istringstream in(*ready);
  std::string word, addr, key;
  uint64_t base = 0;
  in >> word >> addr >> key >> base;
  ASSERT_EQ(word, "READY");
  auto writer = UcxTransport::Create(Options());
  ASSERT_TRUE(writer.ok());
  std::vector<char> pool(1 << 20, 3);
  ASSERT_TRUE((*writer)->RegisterPool(pool.data(), pool.size()).ok());
  const absl::Time start = absl::Now();
  const absl::Duration budget = absl::Seconds(2);
  KvTarget target{FromHex(addr), FromHex(key), base, 0};
  Result w, n;
  (*writer)->Write(target, {KvCopy{0, 0, 1 << 20}}, start + budget, w.Callback());
  (*writer)->Notify(target, "done", start + budget, n.Callback());
  ASSERT_TRUE(w.Wait(budget + absl::Seconds(5))) << "write hung";
  ASSERT_TRUE(n.Wait(budget + absl::Seconds(5))) << "notice hung";
  EXPECT_FALSE(w.status().ok());
  EXPECT_FALSE(n.status().ok());
  EXPECT_LT(w.at() - start, budget + absl::Seconds(2));
  EXPECT_GE(w.at() - start, budget - absl::Milliseconds(50)) << w.status();
  // The transport still works for other peers afterwards.
  Pair p = MakePair(4096, 4096);
  ASSERT_TRUE(p.owner);
  Result ok;
  p.writer->Write(p.target(), {KvCopy{0, 0, 4096}}, absl::Now() + absl::Seconds(10), ok.Callback());
  ASSERT_TRUE(ok.Wait(absl::Seconds(15)));
  EXPECT_TRUE(ok.status().ok()) << ok.status();
}

// Writer here, owner in another process: byte-exact pool and the notice after the writes.
TEST_P(UcxTransportTest, TwoProcessesByteExactWithNoticeAfterWrites) {
  constexpr size_t kPool = 4 << 20;
  for (bool allocate : {false, true}) {
    std::vector<std::string> argv{TANDEM_UCX_PEER, "--tls", GetParam(), "--pool-bytes",
                                  std::to_string(kPool)};
    if (allocate) argv.push_back("--allocate");
    ChildProcess peer(argv);
    auto ready = peer.ReadLine(20000);
    ASSERT_TRUE(ready.has_value());
    std::istringstream in(*ready);
    std::string word, addr, key;
    uint64_t base = 0;
    in >> word >> addr >> key >> base;
    ASSERT_EQ(word, "READY");
    auto writer = UcxTransport::Create(Options());
    ASSERT_TRUE(writer.ok());
    std::vector<char> pool(kPool);
    FillRandom(pool.data(), kPool, 99);
    ASSERT_TRUE((*writer)->RegisterPool(pool.data(), kPool).ok());
    // 256 blocks of 16 KiB, written in reverse order in 4 writes.
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
    (*writer)->Notify(target, "payload\x01\x02", deadline, notice.Callback());
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
    EXPECT_EQ(hash, Fnv1a(expected.data(), kPool)) << "allocate=" << allocate;
    EXPECT_EQ(peer.CloseAndWait(), 0);
  }
}

// The owner process is killed: the next writes end with an error by their deadline.
TEST_P(UcxTransportTest, KilledPeerProcessFailsWithinTheDeadline) {
  constexpr size_t kPool = 1 << 20;
  ChildProcess peer({TANDEM_UCX_PEER, "--tls", GetParam(), "--pool-bytes", std::to_string(kPool)});
  auto ready = peer.ReadLine(20000);
  ASSERT_TRUE(ready.has_value());
  std::istringstream in(*ready);
  std::string word, addr, key;
  uint64_t base = 0;
  in >> word >> addr >> key >> base;
  ASSERT_EQ(word, "READY");
  auto writer = UcxTransport::Create(Options());
  ASSERT_TRUE(writer.ok());
  std::vector<char> pool(kPool, 5);
  ASSERT_TRUE((*writer)->RegisterPool(pool.data(), kPool).ok());
  KvTarget target{FromHex(addr), FromHex(key), base, 0};
  Result first;
  (*writer)->Write(target, {KvCopy{0, 0, kPool}}, absl::Now() + absl::Seconds(10),
                   first.Callback());
  ASSERT_TRUE(first.Wait(absl::Seconds(15)));
  ASSERT_TRUE(first.status().ok()) << first.status();
  peer.Kill();
  const absl::Duration budget = absl::Seconds(3);
  const absl::Time start = absl::Now();
  std::vector<std::unique_ptr<Result>> results;
  for (int i = 0; i < 8; ++i) {
    results.push_back(std::make_unique<Result>());
    (*writer)->Write(target, {KvCopy{0, 0, kPool}}, start + budget, results.back()->Callback());
  }
  Result n;
  (*writer)->Notify(target, "x", start + budget, n.Callback());
  for (auto& r : results) {
    ASSERT_TRUE(r->Wait(budget + absl::Seconds(5))) << "write hung";
    EXPECT_LT(r->at() - start, budget + absl::Seconds(2));
  }
  ASSERT_TRUE(n.Wait(budget + absl::Seconds(5))) << "notice hung";
  EXPECT_FALSE(n.status().ok());
  EXPECT_FALSE(results.back()->status().ok());
}

TEST(UcxTransportCreateTest, UnusableTransportListIsAnError) {
  UcxTransportOptions o;
  o.tls = "no-such-transport";
  auto t = UcxTransport::Create(o);
  EXPECT_FALSE(t.ok());
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxTransportTest, ::testing::Values("tcp", "posix,sysv,self", ""),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param == "tcp"  ? std::string("tcp")
                                  : info.param.empty() ? std::string("default")
                                                       : std::string("shm");
                         });

}  // namespace
}  // namespace tandem
