// DecodeService's streams cost memory, not threads (issue 16 item 9): Reserve and Generate run on
// gRPC's callback API, so with the sync pool capped at 4 threads 32 reservations and 32 local
// generations still run at once and complete; 200 open streams (reservations awaiting KV and ones
// waiting for blocks) leave the process's thread count where it was, give or take a constant. And
// the stages a stream waits in without a thread keep their behaviour: a reservation that finds no
// blocks within reserve_wait_timeout is refused, one beyond max_waiting_reservations is refused at
// once, a client that goes away while reserving is cancelled, and a drain lets a stream that ends
// in time finish before it cancels the rest.
#include <dirent.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/metrics/prometheus_text.h"
#include "common/serving/grpc_server.h"
#include "gtest/gtest.h"
#include "tests/common/serving/liveness_probe.h"
#include "tests/common/serving/metrics_scrape.h"
#include "tests/decode_node/decode_test_node.h"

namespace tandem {
namespace {

using ::tandem::testing::DecodeNode;
using ::tandem::testing::GenerateCall;
using ::tandem::testing::ReserveCall;
using ::tandem::testing::SendCompletion;
using ::tandem::testing::WriteKv;

// The threads of this process (the test's, the server's, the engine's, gRPC's).
int CountThreads() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* entry = readdir(dir)) n += entry->d_name[0] != '.' ? 1 : 0;
  closedir(dir);
  return n;
}

// A prompt of `blocks` 4-token blocks, distinct for each `i` below kVocab * kVocab (no prefix
// cache sharing between them).
std::vector<int> DistinctPrompt(int i, int blocks) {
  std::vector<int> prompt = {i % kVocab, i / kVocab};
  while (static_cast<int>(prompt.size()) < 4 * blocks) {
    prompt.push_back(static_cast<int>(prompt.size()) % kVocab);
  }
  return prompt;
}

double Ended(const PrometheusText& scrape, const std::string& outcome) {
  return scrape.Value("tandem_decode_reservations_ended_total", {{"outcome", outcome}})
      .value_or(-1);
}

// Once `ended` reservations are counted as ended (up to 4 s).
PrometheusText ScrapeOnceEnded(DecodeMetrics& metrics, double ended) {
  return testing::ScrapeUntil(metrics, [ended](const PrometheusText& scrape) {
    return scrape.Sum("tandem_decode_reservations_ended_total") >= ended;
  });
}

v1::NodeLoad Load(DecodeNode& node) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::NodeLoad load;
  EXPECT_TRUE(node.stub->GetLoad(&context, v1::LoadRequest(), &load).ok());
  return load;
}

constexpr int kStreamsSyncThreads = 4;
constexpr int kStreams = 32;

TEST(DecodeServiceStreamsTest, ManyStreamsRunAndCompleteOnACappedSyncPool) {
  // 32 reservations of 2 blocks, 32 generations of 2 blocks (4 prompt + 4 generated tokens).
  DecodeNode node(GrpcServerOptions{.max_sync_threads = kStreamsSyncThreads}, /*num_blocks=*/160);
  std::vector<std::unique_ptr<ReserveCall>> reserves;
  std::vector<v1::KvHandoff> handoffs;
  for (int i = 0; i < kStreams; ++i) {
    reserves.push_back(std::make_unique<ReserveCall>(node, DistinctPrompt(i, 2), 4));
    v1::DecodeEvent first;
    ASSERT_TRUE(reserves.back()->reader->Read(&first)) << "reserve " << i;
    ASSERT_TRUE(first.has_handoff()) << "reserve " << i;
    handoffs.push_back(first.handoff());
  }
  // The engine publishes its load after it applies its inbox, which can be just after the last
  // handoff went out: wait for it (up to 4 s).
  v1::NodeLoad load;
  for (int i = 0; i < 200; ++i) {
    load = Load(node);
    if (load.num_awaiting_kv() == kStreams) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(load.num_awaiting_kv(), kStreams);
  // All 32 reservations are open; 32 generations start before any is read.
  std::vector<std::unique_ptr<GenerateCall>> generates;
  for (int i = 0; i < kStreams; ++i) {
    generates.push_back(std::make_unique<GenerateCall>(node, DistinctPrompt(1000 + i, 1), 4));
  }
  // A sync call still finds a thread: no stream holds one.
  EXPECT_TRUE(testing::SyncCall(*node.stub, absl::Seconds(5)).ok());
  for (int i = 0; i < kStreams; ++i) {
    GenerateCall& call = *generates[i];
    const grpc::Status status = call.Finish();
    ASSERT_TRUE(status.ok()) << "generate " << i << ": " << status.error_message();
    int tokens = 0;
    for (const v1::DecodeEvent& event : call.events) tokens += event.tokens_size();
    EXPECT_EQ(tokens, 4) << "generate " << i;
    ASSERT_FALSE(call.events.empty());
    EXPECT_GE(call.events.front().queue_us(), 0) << "generate " << i;
    EXPECT_EQ(call.events.back().finish_reason(), "length") << "generate " << i;
    EXPECT_EQ(call.events.back().usage().completion_tokens(), 4) << "generate " << i;
  }
  // The reservations complete: their KV arrives, each streams its imported token and 3 more.
  for (int i = 0; i < kStreams; ++i) {
    WriteKv(node.backend, handoffs[i], DistinctPrompt(i, 2));
    SendCompletion(handoffs[i], /*ok=*/true, 7);
  }
  for (int i = 0; i < kStreams; ++i) {
    ReserveCall& call = *reserves[i];
    const grpc::Status status = call.Finish();
    ASSERT_TRUE(status.ok()) << "reserve " << i << ": " << status.error_message();
    ASSERT_FALSE(call.events.empty());
    ASSERT_EQ(call.events.front().tokens_size(), 1) << "reserve " << i;
    EXPECT_EQ(call.events.front().tokens(0).id(), 7) << "reserve " << i;
    EXPECT_EQ(call.events.back().usage().completion_tokens(), 4) << "reserve " << i;
  }
  const PrometheusText scrape = ScrapeOnceEnded(node.metrics, kStreams);
  EXPECT_EQ(Ended(scrape, "imported"), kStreams);
  EXPECT_EQ(scrape.Value("tandem_decode_generate_requests_total"), kStreams);
}

TEST(DecodeServiceStreamsTest, TwoHundredOpenStreamsTakeNoThreadEach) {
  constexpr int kOpen = 200;
  constexpr int kBlocks = 150;  // 150 reservations get blocks, 50 wait for them
  constexpr int kThreadBound = 24;
  DecodeNode node(GrpcServerOptions{}, kBlocks);  // the sync pool uncapped, as tandem-decode runs
  // One call of each kind first, so that gRPC's own threads are up before the count.
  {
    GenerateCall warm(node, DistinctPrompt(4000, 1), 2);
    ASSERT_TRUE(warm.Finish().ok());
    Load(node);
  }
  const int before = CountThreads();
  std::vector<std::unique_ptr<ReserveCall>> open;
  for (int i = 0; i < kOpen; ++i) {
    open.push_back(std::make_unique<ReserveCall>(node, DistinctPrompt(i, 1), 4));
    if (i < kBlocks) {
      v1::DecodeEvent first;
      ASSERT_TRUE(open.back()->reader->Read(&first)) << "stream " << i;
      ASSERT_TRUE(first.has_handoff()) << "stream " << i;
    }
  }
  // The last 50 are queued in the engine for blocks.
  v1::NodeLoad load;
  for (int i = 0; i < 200; ++i) {
    load = Load(node);
    if (load.num_waiting() == kOpen - kBlocks) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(load.num_awaiting_kv(), kBlocks);
  EXPECT_EQ(load.num_waiting(), kOpen - kBlocks);
  const int during = CountThreads();
  std::printf(
      "threads: %d before, %d with %d open streams (%d awaiting KV, %d waiting for blocks)\n",
      before, during, kOpen, kBlocks, kOpen - kBlocks);
  EXPECT_GT(before, 0);
  EXPECT_LE(during - before, kThreadBound);

  for (std::unique_ptr<ReserveCall>& call : open) call->context.TryCancel();
  for (std::unique_ptr<ReserveCall>& call : open) {
    EXPECT_EQ(call->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  const PrometheusText scrape = ScrapeOnceEnded(node.metrics, kOpen);
  EXPECT_EQ(Ended(scrape, "cancelled"), kOpen);
}

// A pool of 8 blocks, 7 of them held by one reservation of 28 tokens: one of 2 blocks must wait.
struct FullPool {
  explicit FullPool(DecodeNode& node) : holder(node, DistinctPrompt(0, 7), 4) {
    v1::DecodeEvent first;
    EXPECT_TRUE(holder.reader->Read(&first));
    EXPECT_TRUE(first.has_handoff());
  }
  ~FullPool() {
    holder.context.TryCancel();
    holder.Finish();
  }
  ReserveCall holder;
};

TEST(DecodeServiceStreamsTest, AReservationThatFindsNoBlocksInTimeIsRefused) {
  DecodeNode node(GrpcServerOptions{}, /*num_blocks=*/8, [](DecodeServiceOptions& options) {
    options.reserve_wait_timeout = absl::Milliseconds(300);
  });
  FullPool full(node);
  const absl::Time start = absl::Now();
  ReserveCall waiting(node, DistinctPrompt(1, 2), 4);
  const grpc::Status status = waiting.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("no KV blocks came free"), std::string::npos)
      << status.error_message();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  EXPECT_TRUE(waiting.events.empty());
  EXPECT_EQ(Ended(ScrapeOnceEnded(node.metrics, 1), "refused"), 1);
}

TEST(DecodeServiceStreamsTest, WaitingReservationsBeyondTheLimitAreRefusedAtOnce) {
  DecodeNode node(GrpcServerOptions{}, /*num_blocks=*/8,
                  [](DecodeServiceOptions& options) { options.max_waiting_reservations = 1; });
  FullPool full(node);
  ReserveCall waiting(node, DistinctPrompt(1, 2), 4);
  for (int i = 0; i < 200 && Load(node).num_waiting() < 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ReserveCall refused(node, DistinctPrompt(2, 2), 4);
  const grpc::Status status = refused.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("already waiting"), std::string::npos)
      << status.error_message();
  // The waiting one's client goes away: the call ends cancelled, the engine lets the request go.
  waiting.context.TryCancel();
  EXPECT_EQ(waiting.Finish().error_code(), grpc::StatusCode::CANCELLED);
  const PrometheusText scrape = ScrapeOnceEnded(node.metrics, 2);
  EXPECT_EQ(Ended(scrape, "refused"), 1);
  EXPECT_EQ(Ended(scrape, "cancelled"), 1);
  for (int i = 0; i < 200 && Load(node).num_waiting() > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(Load(node).num_waiting(), 0);
}

TEST(DecodeServiceStreamsTest, ADrainLetsAStreamThatEndsInTimeFinishThenCancelsTheRest) {
  DecodeNode node;
  ReserveCall finishing(node, DistinctPrompt(1, 2), 4);
  ReserveCall outliving(node, DistinctPrompt(2, 2), 4);
  v1::DecodeEvent first;
  ASSERT_TRUE(finishing.reader->Read(&first));
  ASSERT_TRUE(first.has_handoff());
  const v1::KvHandoff handoff = first.handoff();
  ASSERT_TRUE(outliving.reader->Read(&first));
  ASSERT_TRUE(first.has_handoff());

  const absl::Time start = absl::Now();
  std::thread drain([&] { DrainGrpcServer(*node.server.server, absl::Milliseconds(800)); });
  // During the drain the first reservation's KV arrives: it streams to its end.
  absl::SleepFor(absl::Milliseconds(100));
  WriteKv(node.backend, handoff, DistinctPrompt(1, 2));
  SendCompletion(handoff, /*ok=*/true, 7);
  const grpc::Status finished = finishing.Finish();
  EXPECT_TRUE(finished.ok()) << finished.error_message();
  ASSERT_FALSE(finishing.events.empty());
  EXPECT_EQ(finishing.events.back().usage().completion_tokens(), 4);
  // The other one never gets its KV: cancelled once the drain's time is up (its client sees the
  // server go: UNAVAILABLE).
  EXPECT_FALSE(outliving.Finish().ok());
  drain.join();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(800));
  const PrometheusText scrape = ScrapeOnceEnded(node.metrics, 2);
  EXPECT_EQ(Ended(scrape, "imported"), 1);
  EXPECT_EQ(Ended(scrape, "cancelled"), 1);
}

}  // namespace
}  // namespace tandem
