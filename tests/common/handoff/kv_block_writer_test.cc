#include "common/handoff/kv_block_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/transport/local_transport.h"
#include "common/transport/ucx_transport.h"
#include "tests/common/transport/transport_test_util.h"

namespace tandem {
namespace {

using testing::FillRandom;
using ::testing::HasSubstr;

KvLayout MakeLayout(int32_t num_blocks) {
  KvLayout l;
  l.dtype = DType::kF32;
  l.num_layers = 3;
  l.num_kv_heads = 2;
  l.head_dim = 4;
  l.block_size = 4;
  l.num_blocks = num_blocks;
  return l;
}

constexpr RequestId kEngineId = 17;

// A prefill side (writer transport + pool) and a decode side (owner transport + pool) with a
// KvBlockWriter between them, recording what the writer reports.
class WriterHarness {
 public:
  explicit WriterHarness(KvTransport* writer, KvTransport* owner)
      : writer_transport_(writer), owner_transport_(owner) {
    local_pool_.resize(local_layout_.total_bytes());
    FillRandom(local_pool_.data(), local_pool_.size(), 5);
    remote_pool_.assign(remote_layout_.total_bytes(), 0);
    EXPECT_TRUE(writer->RegisterPool(local_pool_.data(), local_pool_.size()).ok());
    EXPECT_TRUE(owner->RegisterPool(remote_pool_.data(), remote_pool_.size()).ok());
    owner->SetNoticeHandler([this](std::string_view payload) {
      auto c = ParseKvCompletion(payload);
      EXPECT_TRUE(c.ok());
      absl::MutexLock lock(&mu_);
      notices_.push_back(*c);
    });
  }

  KvWriteTarget Target(std::vector<int32_t> block_ids, int32_t cached_tokens = 0) {
    KvWriteTarget t;
    t.target = KvTarget{owner_transport_->address(), owner_transport_->pool_remote_key(),
                        owner_transport_->pool_base(), owner_transport_->incarnation()};
    t.layout = remote_layout_;
    t.block_ids = std::move(block_ids);
    t.num_cached_tokens = cached_tokens;
    t.decode_request_id = 900;
    t.decode_incarnation = owner_transport_->incarnation();
    return t;
  }

  absl::StatusOr<std::shared_ptr<KvBlockWriter>> Make(KvWriteTarget target,
                                                      absl::Time deadline = absl::InfiniteFuture(),
                                                      std::optional<KvLayout> local = {},
                                                      Clock* clock = Clock::Real()) {
    target_ = target;
    KvBlockWriterOptions o;
    o.clock = clock;
    o.transport = writer_transport_;
    o.local_layout = local.value_or(local_layout_);
    o.target = std::move(target);
    o.deadline = deadline;
    o.local_incarnation = 555;
    o.release_blocks = [this](RequestId id) {
      absl::MutexLock lock(&mu_);
      releases_.push_back(id);
    };
    o.on_finished = [this](absl::StatusOr<KvWriteResult> r) {
      absl::MutexLock lock(&mu_);
      results_.push_back(std::move(r));
    };
    return KvBlockWriter::Create(std::move(o));
  }

  static GenerationEvent FirstToken() {
    GenerationEvent e;
    e.request_id = kEngineId;
    e.token = 321;
    e.logprob = -0.25f;
    e.top_logprobs = {{321, -0.25f}, {4, -2.0f}};
    e.finished = true;
    e.finish_reason = FinishReason::kPrefillDone;
    return e;
  }

  // Waits until on_finished ran and, if `want_release`, the blocks were released.
  bool WaitDone(bool want_release = true, absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    auto done = [this, want_release]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !results_.empty() && (!want_release || !releases_.empty());
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  bool WaitNotices(size_t n, absl::Duration timeout = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return notices_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }

  std::vector<RequestId> releases() {
    absl::MutexLock lock(&mu_);
    return releases_;
  }
  std::vector<absl::StatusOr<KvWriteResult>> results() {
    absl::MutexLock lock(&mu_);
    return results_;
  }
  std::vector<tandem::v1::KvCompletion> notices() {
    absl::MutexLock lock(&mu_);
    return notices_;
  }

  // True when exactly the remote blocks of prompt blocks >= first_sent hold the local blocks'
  // bytes and every other byte of the remote pool is zero.
  ::testing::AssertionResult RemoteHolds(const std::vector<int32_t>& local_blocks,
                                         int32_t first_sent) {
    std::vector<char> expected(remote_pool_.size(), 0);
    const size_t block_bytes = local_layout_.block_stride() * sizeof(float);
    for (size_t i = first_sent; i < local_blocks.size(); ++i) {
      for (int layer = 0; layer < local_layout_.num_layers; ++layer) {
        for (int kv = 0; kv < 2; ++kv) {
          std::memcpy(
              expected.data() +
                  remote_layout_.Offset(layer, kv, target_.block_ids[i], 0, 0) * sizeof(float),
              local_pool_.data() +
                  local_layout_.Offset(layer, kv, local_blocks[i], 0, 0) * sizeof(float),
              block_bytes);
        }
      }
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      if (expected[i] != remote_pool_[i]) {
        return ::testing::AssertionFailure() << "remote byte " << i << " differs";
      }
    }
    return ::testing::AssertionSuccess();
  }

  bool RemoteUntouched() {
    return std::count(remote_pool_.begin(), remote_pool_.end(), 0) ==
           static_cast<long>(remote_pool_.size());
  }

  const KvLayout local_layout_ = MakeLayout(16);
  const KvLayout remote_layout_ = MakeLayout(40);

 private:
  KvTransport* writer_transport_;
  KvTransport* owner_transport_;
  std::vector<char> local_pool_;
  std::vector<char> remote_pool_;
  KvWriteTarget target_;
  absl::Mutex mu_;
  std::vector<RequestId> releases_;
  std::vector<absl::StatusOr<KvWriteResult>> results_;
  std::vector<tandem::v1::KvCompletion> notices_;
};

TEST(KvBlockWriterTest, PlanCoalescesRunsConsecutiveOnBothSides) {
  KvWriteTarget t;
  t.layout = MakeLayout(40);
  t.block_ids = {7, 8, 9, 10, 11, 30};
  int32_t skipped = -1;
  // Local 3,4,5 -> remote 7,8,9 (one run); local 9,10 -> remote 10,11 (one run: 5->9 breaks
  // the local side); local 11 -> remote 30 (remote side breaks).
  const std::vector<int32_t> local = {3, 4, 5, 9, 10, 11};
  auto copies = KvBlockWriter::PlanCopies(MakeLayout(16), t, 0, local, &skipped);
  ASSERT_TRUE(copies.ok()) << copies.status();
  EXPECT_EQ(skipped, 0);
  ASSERT_EQ(copies->size(), 3u * 3 * 2);  // runs x layers x K/V
  const KvLayout l = MakeLayout(16);
  const uint64_t block_bytes = l.block_stride() * 4;
  // First layer's K: the three runs in order.
  EXPECT_EQ((*copies)[0].src_offset, l.Offset(0, 0, 3, 0, 0) * 4u);
  EXPECT_EQ((*copies)[0].dst_offset, t.layout.Offset(0, 0, 7, 0, 0) * 4u);
  EXPECT_EQ((*copies)[0].bytes, 3 * block_bytes);
  EXPECT_EQ((*copies)[1].bytes, 2 * block_bytes);
  EXPECT_EQ((*copies)[2].bytes, 1 * block_bytes);
  EXPECT_EQ((*copies)[2].dst_offset, t.layout.Offset(0, 0, 30, 0, 0) * 4u);
  // Last copy: last layer's V of the last run.
  EXPECT_EQ(copies->back().src_offset, l.Offset(2, 1, 11, 0, 0) * 4u);

  // Skips cached blocks, and a block index beyond the handoff's blocks is OutOfRange.
  t.num_cached_tokens = 8;
  copies = KvBlockWriter::PlanCopies(l, t, 0, std::vector<int32_t>{3, 4, 5}, &skipped);
  ASSERT_TRUE(copies.ok());
  EXPECT_EQ(skipped, 2);
  EXPECT_EQ(copies->size(), 6u);
  EXPECT_EQ(
      KvBlockWriter::PlanCopies(l, t, 5, std::vector<int32_t>{1, 2}, &skipped).status().code(),
      absl::StatusCode::kOutOfRange);
}

TEST(KvBlockWriterTest, WritesChunksByteExactThenNotifiesReleasesAndReports) {
  LocalTransport writer, owner;
  WriterHarness h(&writer, &owner);
  const std::vector<int32_t> local = {3, 4, 5, 9, 10, 11, 0};
  auto w = h.Make(h.Target({7, 8, 9, 10, 11, 30, 2}));
  ASSERT_TRUE(w.ok()) << w.status();
  writer.Pause();  // hold the writes in flight
  (*w)->OnBlocksReady(kEngineId, 0, std::span<const int32_t>(local).subspan(0, 3));
  (*w)->OnBlocksReady(kEngineId, 3, std::span<const int32_t>(local).subspan(3, 3));
  (*w)->OnBlocksReady(kEngineId, 6, std::span<const int32_t>(local).subspan(6, 1));
  (*w)->OnPrefillDone(WriterHarness::FirstToken(), 6);
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_TRUE(h.releases().empty()) << "released while writes were in flight";
  EXPECT_TRUE(h.notices().empty());
  writer.Resume();
  ASSERT_TRUE(h.WaitDone());
  ASSERT_TRUE(h.WaitNotices(1));
  EXPECT_TRUE(h.RemoteHolds(local, 0));
  EXPECT_EQ(h.releases(), std::vector<RequestId>{kEngineId});
  auto results = h.results();
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  const KvWriteResult& r = *results[0];
  EXPECT_EQ(r.first_token, 321);
  EXPECT_EQ(r.rng_counter, 6u);
  EXPECT_EQ(r.num_transport_writes, 3);
  // Chunk 1: one run; chunk 2: local 9,10,11 -> remote 10,11,30 = two runs; chunk 3: one.
  EXPECT_EQ(r.num_writes, (1 + 2 + 1) * 3 * 2);
  EXPECT_EQ(r.num_blocks_written, 7);
  EXPECT_EQ(r.bytes, 7 * 3 * 2 * h.local_layout_.block_stride() * 4);
  EXPECT_LE(r.first_write_issued, r.last_write_done);
  EXPECT_LE(r.last_write_done, r.completion_sent);
  EXPECT_LE(r.prefill_done, r.completion_sent);  // held writes finished after the prefill
  auto n = h.notices()[0];
  EXPECT_TRUE(n.ok());
  EXPECT_EQ(n.request_id(), 900u);
  EXPECT_EQ(n.prefill_incarnation(), 555u);
  EXPECT_EQ(n.decode_incarnation(), owner.incarnation());
  EXPECT_EQ(n.first_token().id(), 321);
  EXPECT_FLOAT_EQ(n.first_token().logprob(), -0.25f);
  ASSERT_EQ(n.first_token().top_logprobs_size(), 2);
  EXPECT_EQ(n.first_token().top_logprobs(1).token_id(), 4);
  EXPECT_EQ(n.rng_counter(), 6u);
}

TEST(KvBlockWriterTest, SkipsBlocksTheDecodeNodeHasCached) {
  LocalTransport writer, owner;
  WriterHarness h(&writer, &owner);
  const std::vector<int32_t> local = {1, 2, 3, 4};
  auto w = h.Make(h.Target({20, 21, 22, 23}, /*cached_tokens=*/8));
  ASSERT_TRUE(w.ok());
  (*w)->OnBlocksReady(kEngineId, 0, local);
  (*w)->OnPrefillDone(WriterHarness::FirstToken(), 0);
  ASSERT_TRUE(h.WaitDone());
  EXPECT_TRUE(h.RemoteHolds(local, 2));
  ASSERT_TRUE(h.results()[0].ok());
  EXPECT_EQ(h.results()[0]->num_blocks_skipped, 2);
  EXPECT_EQ(h.results()[0]->num_blocks_written, 2);
}

TEST(KvBlockWriterTest, LayoutMismatchIsAnErrorNamingTheFieldAndWritesNothing) {
  LocalTransport writer, owner;
  WriterHarness h(&writer, &owner);
  KvLayout other = h.local_layout_;
  other.head_dim = 8;
  auto w = h.Make(h.Target({1, 2}), absl::InfiniteFuture(), other);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("head_dim"));
  EXPECT_TRUE(h.RemoteUntouched());
  EXPECT_TRUE(h.releases().empty());
  // The refusal can still be told to the decode node.
  absl::Notification sent;
  KvBlockWriter::NotifyFailure(&writer, h.Target({1, 2}), 555, nullptr, w.status(),
                               absl::InfiniteFuture(), [&](absl::Status s) {
                                 EXPECT_TRUE(s.ok());
                                 sent.Notify();
                               });
  ASSERT_TRUE(sent.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(h.WaitNotices(1));
  EXPECT_FALSE(h.notices()[0].ok());
  EXPECT_THAT(h.notices()[0].error(), HasSubstr("head_dim"));
}

TEST(KvBlockWriterTest, AbortWaitsForInFlightWritesThenNotifiesAndReleasesOnce) {
  LocalTransport writer, owner;
  WriterHarness h(&writer, &owner);
  const std::vector<int32_t> local = {1, 2};
  auto w = h.Make(h.Target({5, 6, 7, 8}));
  ASSERT_TRUE(w.ok());
  writer.Pause();
  (*w)->OnBlocksReady(kEngineId, 0, local);
  (*w)->OnAborted(kEngineId, absl::CancelledError("client went away"));
  (*w)->OnBlocksReady(kEngineId, 2, local);  // ignored: aborted
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_TRUE(h.releases().empty()) << "released while a write still reads the blocks";
  EXPECT_TRUE(h.results().empty());
  writer.Resume();
  ASSERT_TRUE(h.WaitDone());
  ASSERT_TRUE(h.WaitNotices(1));
  EXPECT_EQ(h.releases(), std::vector<RequestId>{kEngineId});
  ASSERT_EQ(h.results().size(), 1u);
  EXPECT_EQ(h.results()[0].status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(std::string(h.results()[0].status().message()), HasSubstr("client went away"));
  EXPECT_FALSE(h.notices()[0].ok());
  EXPECT_THAT(h.notices()[0].error(), HasSubstr("client went away"));
  // A late OnPrefillDone changes nothing.
  (*w)->OnPrefillDone(WriterHarness::FirstToken(), 0);
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(h.releases().size(), 1u);
  EXPECT_EQ(h.results().size(), 1u);
  EXPECT_EQ(h.notices().size(), 1u);
}

TEST(KvBlockWriterTest, WriteErrorStopsWritingReportsAndReleasesAfterTheEngineIsDone) {
  LocalTransport writer, owner;
  WriterHarness h(&writer, &owner);
  const std::vector<int32_t> local = {1, 2, 3};
  auto w = h.Make(h.Target({5, 6, 7}));
  ASSERT_TRUE(w.ok());
  writer.InjectWriteError(absl::UnavailableError("link down"));
  (*w)->OnBlocksReady(kEngineId, 0, std::span<const int32_t>(local).subspan(0, 1));
  ASSERT_TRUE(h.WaitDone(/*want_release=*/false));
  EXPECT_EQ(h.results()[0].status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(h.releases().empty()) << "the engine still owns the request";
  ASSERT_TRUE(h.WaitNotices(1));
  EXPECT_FALSE(h.notices()[0].ok());
  writer.InjectWriteError(absl::OkStatus());
  (*w)->OnBlocksReady(kEngineId, 1, std::span<const int32_t>(local).subspan(1, 2));  // no write
  (*w)->OnPrefillDone(WriterHarness::FirstToken(), 0);
  ASSERT_TRUE(h.WaitDone(/*want_release=*/true));
  EXPECT_EQ(h.releases(), std::vector<RequestId>{kEngineId});
  EXPECT_EQ(h.results().size(), 1u);
  EXPECT_EQ(h.notices().size(), 1u);
  EXPECT_TRUE(h.RemoteUntouched());
}

TEST(KvBlockWriterTest, DeadlineFailsSlowWritesAndSkipsTheSuccessNotice) {
  LocalTransportOptions slow;
  slow.write_delay = absl::Milliseconds(500);
  LocalTransport writer(slow), owner;
  WriterHarness h(&writer, &owner);
  const std::vector<int32_t> local = {1, 2};
  auto w = h.Make(h.Target({5, 6}), absl::Now() + absl::Milliseconds(100));
  ASSERT_TRUE(w.ok());
  (*w)->OnBlocksReady(kEngineId, 0, local);
  (*w)->OnPrefillDone(WriterHarness::FirstToken(), 0);
  ASSERT_TRUE(h.WaitDone());
  EXPECT_EQ(h.results()[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(h.releases(), std::vector<RequestId>{kEngineId});
  EXPECT_TRUE(h.RemoteUntouched());
  absl::SleepFor(absl::Milliseconds(50));
  for (const auto& n : h.notices()) EXPECT_FALSE(n.ok());
}

TEST(KvBlockWriterTest, DeadlinePassedBeforeTheFirstBlockWritesNothing) {
  LocalTransport writer, owner;
  WriterHarness h(&writer, &owner);
  const std::vector<int32_t> local = {1};
  auto w = h.Make(h.Target({5}), absl::Now() - absl::Milliseconds(1));
  ASSERT_TRUE(w.ok());
  (*w)->OnBlocksReady(kEngineId, 0, local);
  (*w)->OnPrefillDone(WriterHarness::FirstToken(), 0);
  ASSERT_TRUE(h.WaitDone());
  EXPECT_EQ(h.results()[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(h.releases().size(), 1u);
  EXPECT_TRUE(h.RemoteUntouched());
}

// The deadline is on the injected clock: passed there, the transfer fails before any byte moves
// though no real time has passed; the result's timestamps are that clock's too.
TEST(KvBlockWriterTest, TheDeadlineIsReadOnTheInjectedClock) {
  LocalTransport writer, owner;
  WriterHarness h(&writer, &owner);
  ManualClock clock(absl::ToUnixNanos(absl::FromUnixSeconds(1'800'000'000)));
  const std::vector<int32_t> local = {1};
  auto w = h.Make(h.Target({5}), clock.Now() + absl::Seconds(10), std::nullopt, &clock);
  ASSERT_TRUE(w.ok());
  clock.AdvanceSeconds(11);
  (*w)->OnBlocksReady(kEngineId, 0, local);
  (*w)->OnPrefillDone(WriterHarness::FirstToken(), 0);
  ASSERT_TRUE(h.WaitDone());
  EXPECT_EQ(h.results()[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(h.RemoteUntouched());

  LocalTransport writer2, owner2;
  WriterHarness in_time(&writer2, &owner2);
  auto ok =
      in_time.Make(in_time.Target({5}), clock.Now() + absl::Seconds(10), std::nullopt, &clock);
  ASSERT_TRUE(ok.ok());
  (*ok)->OnBlocksReady(kEngineId, 0, local);
  (*ok)->OnPrefillDone(WriterHarness::FirstToken(), 0);
  ASSERT_TRUE(in_time.WaitDone());
  ASSERT_TRUE(in_time.results()[0].ok()) << in_time.results()[0].status();
  EXPECT_EQ(in_time.results()[0]->prefill_done, clock.Now());
}

TEST(KvBlockWriterTest, MoreBlocksThanReservedIsAnError) {
  LocalTransport writer, owner;
  WriterHarness h(&writer, &owner);
  const std::vector<int32_t> local = {1, 2, 3};
  auto w = h.Make(h.Target({5, 6}));
  ASSERT_TRUE(w.ok());
  (*w)->OnBlocksReady(kEngineId, 0, local);
  (*w)->OnPrefillDone(WriterHarness::FirstToken(), 0);
  ASSERT_TRUE(h.WaitDone());
  EXPECT_EQ(h.results()[0].status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(h.releases().size(), 1u);
  EXPECT_TRUE(h.RemoteUntouched());
}

TEST(KvBlockWriterTest, DecodeNodeGoneFailsTheTransfer) {
  LocalTransport writer;
  auto owner = std::make_unique<LocalTransport>();
  WriterHarness h(&writer, owner.get());
  auto target = h.Target({5, 6});
  auto w = h.Make(target);
  ASSERT_TRUE(w.ok());
  owner.reset();
  const std::vector<int32_t> local = {1, 2};
  (*w)->OnBlocksReady(kEngineId, 0, local);
  (*w)->OnPrefillDone(WriterHarness::FirstToken(), 0);
  ASSERT_TRUE(h.WaitDone());
  EXPECT_EQ(h.results()[0].status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(h.releases().size(), 1u);
}

// The same flow over UCX (tcp) between two transports of this process.
TEST(KvBlockWriterTest, OverUcxTcp) {
  UcxTransportOptions o;
  o.tls = "tcp";
  std::optional<WriterHarness> harness;  // outlives the transports, which map its pools
  auto writer = UcxTransport::Create(o);
  auto owner = UcxTransport::Create(o);
  ASSERT_TRUE(writer.ok() && owner.ok());
  WriterHarness& h = harness.emplace(writer->get(), owner->get());
  const std::vector<int32_t> local = {0, 1, 2, 3, 8, 9, 10, 15};
  auto w = h.Make(h.Target({30, 31, 32, 33, 34, 35, 36, 37}, 4), absl::Now() + absl::Seconds(20));
  ASSERT_TRUE(w.ok());
  (*w)->OnBlocksReady(kEngineId, 0, std::span<const int32_t>(local).subspan(0, 4));
  (*w)->OnBlocksReady(kEngineId, 4, std::span<const int32_t>(local).subspan(4, 4));
  (*w)->OnPrefillDone(WriterHarness::FirstToken(), 1);
  ASSERT_TRUE(h.WaitDone(true, absl::Seconds(30)));
  ASSERT_TRUE(h.results()[0].ok()) << h.results()[0].status();
  ASSERT_TRUE(h.WaitNotices(1));
  EXPECT_TRUE(h.notices()[0].ok());
  EXPECT_TRUE(h.RemoteHolds(local, 1));
  EXPECT_EQ(h.releases().size(), 1u);
}

}  // namespace
}  // namespace tandem
