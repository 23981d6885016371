#include "common/transport/local_transport.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/transport/kv_write_corruption.h"
#include "common/util/clock.h"
#include "tests/common/transport/transport_test_util.h"

namespace tandem {
namespace {

using testing::DifferingBytes;
using testing::FillRandom;

// Records one `done`.
struct Done {
  absl::Notification called;
  absl::Status status;
  std::atomic<int> calls{0};
  TransferDone Callback() {
    return [this](absl::Status s) {
      status = s;
      if (calls.fetch_add(1) == 0) called.Notify();
    };
  }
  absl::Status Wait() {
    EXPECT_TRUE(called.WaitForNotificationWithTimeout(absl::Seconds(10)));
    return status;
  }
};

struct LocalPair {
  LocalTransport owner;
  LocalTransport writer;
  std::vector<char> owner_pool = std::vector<char>(1 << 16, 0);
  std::vector<char> writer_pool = std::vector<char>(1 << 16);
  explicit LocalPair(LocalTransportOptions writer_options = {}) : writer(writer_options) {
    FillRandom(writer_pool.data(), writer_pool.size(), 1);
    EXPECT_TRUE(owner.RegisterPool(owner_pool.data(), owner_pool.size()).ok());
    EXPECT_TRUE(writer.RegisterPool(writer_pool.data(), writer_pool.size()).ok());
  }
  KvTarget target() const {
    return {owner.address(), owner.pool_remote_key(), owner.pool_base(), owner.incarnation()};
  }
};

TEST(LocalTransportTest, WritesLandByteExactAndTheNoticeFollowsThem) {
  LocalPair p;
  std::vector<KvCopy> copies = {{0, 4096, 1000}, {5000, 0, 4096}, {60000, 65536 - 5536, 5536}};
  bool contents_ok_at_notice = false;
  std::string got;
  absl::Notification noticed;
  p.owner.SetNoticeHandler([&](std::string_view payload) {
    contents_ok_at_notice = true;
    for (const KvCopy& c : copies) {
      contents_ok_at_notice &= std::memcmp(p.owner_pool.data() + c.dst_offset,
                                           p.writer_pool.data() + c.src_offset, c.bytes) == 0;
    }
    got = std::string(payload);
    noticed.Notify();
  });
  Done write, notice;
  p.writer.Write(p.target(), copies, absl::InfiniteFuture(), write.Callback());
  p.writer.Notify(p.target(), "hello", absl::InfiniteFuture(), notice.Callback());
  EXPECT_TRUE(write.Wait().ok());
  EXPECT_TRUE(notice.Wait().ok());
  ASSERT_TRUE(noticed.HasBeenNotified());  // delivered before `done`
  EXPECT_TRUE(contents_ok_at_notice);
  EXPECT_EQ(got, "hello");
  // Nothing else was written.
  size_t nonzero_outside = 0;
  for (size_t i = 1000 + 4096; i < 65536 - 5536; ++i) nonzero_outside += p.owner_pool[i] != 0;
  EXPECT_EQ(nonzero_outside, 0u);
  EXPECT_EQ(write.calls.load(), 1);
  EXPECT_EQ(notice.calls.load(), 1);
}

TEST(LocalTransportTest, RejectsBadTargetsAndRanges) {
  LocalPair p;
  {
    KvTarget t = p.target();
    t.address = "local:nowhere";
    Done d;
    p.writer.Write(t, {{0, 0, 16}}, absl::InfiniteFuture(), d.Callback());
    EXPECT_EQ(d.Wait().code(), absl::StatusCode::kUnavailable);
  }
  {
    KvTarget t = p.target();
    t.remote_key = "stale";
    Done d;
    p.writer.Write(t, {{0, 0, 16}}, absl::InfiniteFuture(), d.Callback());
    EXPECT_EQ(d.Wait().code(), absl::StatusCode::kPermissionDenied);
  }
  {
    Done d;
    p.writer.Write(p.target(), {{0, 65536 - 8, 16}}, absl::InfiniteFuture(), d.Callback());
    EXPECT_EQ(d.Wait().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    Done d;
    p.writer.Write(p.target(), {{65536 - 8, 0, 16}}, absl::InfiniteFuture(), d.Callback());
    EXPECT_EQ(d.Wait().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    Done d;
    p.writer.Notify(KvTarget{"local:nowhere", "", 0, 0}, "x", absl::InfiniteFuture(), d.Callback());
    EXPECT_EQ(d.Wait().code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_EQ(std::count(p.owner_pool.begin(), p.owner_pool.end(), 0),
            static_cast<long>(p.owner_pool.size()));
}

TEST(LocalTransportTest, DelayedWritePastItsDeadlineFailsWithoutCopying) {
  LocalTransportOptions o;
  o.write_delay = absl::Milliseconds(300);
  LocalPair p(o);
  Done d;
  const absl::Time start = absl::Now();
  p.writer.Write(p.target(), {{0, 0, 4096}}, start + absl::Milliseconds(50), d.Callback());
  EXPECT_EQ(d.Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_EQ(std::count(p.owner_pool.begin(), p.owner_pool.begin() + 4096, 0), 4096);
}

// Deadlines are read on the injected clock: passed there, a write and a notice fail at once,
// without copying, though no real time has passed; before it, they land.
TEST(LocalTransportTest, DeadlinesFollowTheInjectedClock) {
  ManualClock clock(absl::ToUnixNanos(absl::FromUnixSeconds(1'800'000'000)));
  LocalTransportOptions o;
  o.clock = &clock;
  LocalPair p(o);
  const absl::Time deadline = clock.Now() + absl::Seconds(5);
  Done in_time;
  p.writer.Write(p.target(), {{0, 0, 4096}}, deadline, in_time.Callback());
  EXPECT_TRUE(in_time.Wait().ok());
  EXPECT_TRUE(
      std::equal(p.writer_pool.begin(), p.writer_pool.begin() + 4096, p.owner_pool.begin()));
  clock.AdvanceSeconds(6);
  Done late_write, late_notice;
  p.writer.Write(p.target(), {{8192, 8192, 4096}}, deadline, late_write.Callback());
  p.writer.Notify(p.target(), "notice", deadline, late_notice.Callback());
  EXPECT_EQ(late_write.Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(late_notice.Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(std::count(p.owner_pool.begin() + 8192, p.owner_pool.begin() + 12288, 0), 4096);
}

TEST(LocalTransportTest, PauseHoldsOperationsAndInjectedErrorsFailWrites) {
  LocalPair p;
  p.writer.Pause();
  Done d;
  p.writer.Write(p.target(), {{0, 0, 64}}, absl::InfiniteFuture(), d.Callback());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(d.called.HasBeenNotified());
  EXPECT_EQ(p.writer.pending(), 1);
  p.writer.Resume();
  EXPECT_TRUE(d.Wait().ok());
  p.writer.InjectWriteError(absl::DataLossError("injected"));
  Done e;
  p.writer.Write(p.target(), {{0, 64, 64}}, absl::InfiniteFuture(), e.Callback());
  EXPECT_EQ(e.Wait().code(), absl::StatusCode::kDataLoss);
}

TEST(LocalTransportTest, DestroyingFailsQueuedOperations) {
  std::vector<char> pool(1024);
  auto owner = std::make_unique<LocalTransport>();
  ASSERT_TRUE(owner->RegisterPool(pool.data(), pool.size()).ok());
  auto writer = std::make_unique<LocalTransport>();
  ASSERT_TRUE(writer->RegisterPool(pool.data(), pool.size()).ok());
  writer->Pause();
  Done d, n;
  KvTarget t{owner->address(), owner->pool_remote_key(), owner->pool_base(), 0};
  writer->Write(t, {{0, 0, 8}}, absl::InfiniteFuture(), d.Callback());
  writer->Notify(t, "x", absl::InfiniteFuture(), n.Callback());
  writer.reset();
  EXPECT_EQ(d.Wait().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(n.Wait().code(), absl::StatusCode::kCancelled);
}

TEST(LocalTransportTest, IdentityIsUniquePerInstance) {
  LocalTransport a, b;
  EXPECT_NE(a.address(), b.address());
  EXPECT_NE(a.incarnation(), b.incarnation());
  EXPECT_NE(a.incarnation(), 0u);
  EXPECT_EQ(a.name(), "local");
  std::vector<char> pool(16);
  EXPECT_TRUE(a.RegisterPool(pool.data(), pool.size()).ok());
  EXPECT_EQ(a.RegisterPool(pool.data(), pool.size()).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LocalTransportTest, AllocatePoolGivesAZeroedRegisteredPool) {
  LocalTransport owner, writer;
  auto pool = owner.AllocatePool(10000);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*pool) % 4096, 0u);
  EXPECT_EQ(owner.pool_base(), reinterpret_cast<uintptr_t>(*pool));
  const char* bytes = static_cast<const char*>(*pool);
  EXPECT_EQ(std::count(bytes, bytes + 10000, 0), 10000);
  EXPECT_FALSE(owner.AllocatePool(10).ok());
  std::vector<char> src(10000, 7);
  ASSERT_TRUE(writer.RegisterPool(src.data(), src.size()).ok());
  Done d;
  writer.Write({owner.address(), owner.pool_remote_key(), owner.pool_base(), 0}, {{0, 9000, 1000}},
               absl::InfiniteFuture(), d.Callback());
  EXPECT_TRUE(d.Wait().ok());
  EXPECT_EQ(std::count(bytes + 9000, bytes + 10000, 7), 1000);
}

// The test hook behind the KV checksum tests: the next N Writes land with exactly one byte flipped
// (in the middle of the first copy), the writer's own pool untouched; later Writes are clean.
TEST(LocalTransportTest, CorruptNextWritesFlipsOneLandedByteOfEachWrite) {
  LocalPair p;
  const std::vector<char> source = p.writer_pool;
  p.writer.CorruptNextWrites(1);
  EXPECT_EQ(p.owner.host_pool().data(), reinterpret_cast<const uint8_t*>(p.owner_pool.data()));
  EXPECT_EQ(p.owner.host_pool().size(), p.owner_pool.size());
  const std::vector<KvCopy> copies = {{0, 0, 1000}, {2000, 2000, 1000}};
  for (int round = 0; round < 2; ++round) {
    std::fill(p.owner_pool.begin(), p.owner_pool.end(), 0);
    Done write;
    p.writer.Write(p.target(), copies, absl::InfiniteFuture(), write.Callback());
    ASSERT_TRUE(write.Wait().ok());
    const std::vector<size_t> differ = DifferingBytes(p.owner_pool, p.writer_pool, copies);
    if (round == 0) {
      EXPECT_EQ(differ, std::vector<size_t>{500});
      EXPECT_EQ(static_cast<uint8_t>(p.owner_pool[500] ^ p.writer_pool[500]), KvByteFlip::kMask);
    } else {
      EXPECT_TRUE(differ.empty()) << "only the first Write was to be corrupted";
    }
  }
  EXPECT_EQ(p.writer_pool, source);
}

}  // namespace
}  // namespace tandem
