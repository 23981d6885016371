// A decode node's prefix cache as the router sees it (issue 19, conversation affinity):
// WatchKvEvents publishes the blocks of a conversation's first turn (its prompt and its output),
// the next turn finds them on either path (a local Generate computes only the rest; a Reserve's
// handoff names them cached, so the prefill node does not send them), the node's metrics count
// those hits by path, and a drain ends the stream.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/time/clock.h"
#include "common/kv/block_hash.h"
#include "common/metrics/prometheus_text.h"
#include "gtest/gtest.h"
#include "tandem/v1/node.grpc.pb.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/serving/metrics_scrape.h"
#include "tests/decode_node/decode_test_node.h"

namespace tandem {
namespace {

using ::tandem::testing::DecodeNode;
using ::tandem::testing::GenerateCall;
using ::tandem::testing::ReserveCall;
using ::tandem::testing::Scrape;
using ::tandem::testing::SendCompletion;
using ::tandem::testing::WriteKv;

constexpr int kBlockSize = 4;  // DecodeNode's

// One WatchKvEvents stream and the cache view its events build, as the router's Node keeps it.
struct KvEventsWatch {
  explicit KvEventsWatch(DecodeNode& node) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    reader = node.stub->WatchKvEvents(&context, v1::WatchKvEventsRequest());
  }
  // Reads events until the view holds every hash of `hashes`; false if the stream ended first.
  bool ReadUntilHolds(const std::vector<uint64_t>& hashes) {
    auto holds = [&] {
      return std::all_of(hashes.begin(), hashes.end(),
                         [&](uint64_t h) { return view.contains(h); });
    };
    v1::KvEvents events;
    while (!holds()) {
      if (!reader->Read(&events)) return false;
      messages.push_back(events);
      if (events.reset()) view.clear();
      for (uint64_t h : events.removed()) view.erase(h);
      for (uint64_t h : events.stored()) view.insert(h);
    }
    return true;
  }

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::KvEvents>> reader;
  std::vector<v1::KvEvents> messages;
  absl::flat_hash_set<uint64_t> view;
};

std::vector<int> Tokens(const std::vector<v1::DecodeEvent>& events) {
  std::vector<int> out;
  for (const v1::DecodeEvent& e : events) {
    for (const v1::Token& t : e.tokens()) out.push_back(t.id());
  }
  return out;
}

double PromptTokens(const PrometheusText& scrape, const std::string& path) {
  return scrape.Value("tandem_decode_prompt_tokens_total", {{"path", path}}).value_or(-1);
}
double HitRequests(const PrometheusText& scrape, const std::string& path) {
  return scrape.Value("tandem_decode_prefix_cache_hit_requests_total", {{"path", path}})
      .value_or(-1);
}
double HitTokens(const PrometheusText& scrape, const std::string& path) {
  return scrape.Value("tandem_decode_prefix_cache_hit_prompt_tokens_total", {{"path", path}})
      .value_or(-1);
}

TEST(DecodeServiceKvEventsTest, PublishesAConversationsTurnsAndTheNextTurnHitsThemOnBothPaths) {
  DecodeNode node;
  KvEventsWatch watch(node);
  v1::KvEvents first;
  ASSERT_TRUE(watch.reader->Read(&first));
  EXPECT_TRUE(first.reset());
  EXPECT_EQ(first.stored_size(), 0);
  EXPECT_EQ(first.block_size(), kBlockSize);
  EXPECT_EQ(first.incarnation(), node.transport.incarnation());

  // Turn 1, prefilled here: 10 prompt tokens, 3 output tokens. The KV of all but the last output
  // token is computed: 12 tokens, 3 full blocks, published.
  const std::vector<int> turn1 = MakePrompt(10, 1);
  GenerateCall call1(node, turn1, 3);
  ASSERT_TRUE(call1.Finish().ok());
  const std::vector<int> answer = Tokens(call1.events);
  ASSERT_EQ(answer.size(), 3u);
  std::vector<int> history = turn1;
  history.insert(history.end(), answer.begin(), answer.end());
  const std::vector<TokenId> history_ids(history.begin(), history.end());
  const std::vector<uint64_t> held = HashFullBlocks(history_ids, kBlockSize);
  ASSERT_EQ(held.size(), 3u);
  ASSERT_TRUE(watch.ReadUntilHolds(held)) << "the first turn's blocks were never published";
  EXPECT_FALSE(watch.messages.back().reset());
  EXPECT_EQ(watch.messages.back().incarnation(), node.transport.incarnation());

  // Turn 2 (the first turn, its answer and 3 new tokens), prefilled here: 12 of 16 tokens hit.
  std::vector<int> turn2 = history;
  turn2.insert(turn2.end(), {5, 6, 7});
  GenerateCall call2(node, turn2, 3);
  ASSERT_TRUE(call2.Finish().ok());
  EXPECT_EQ(call2.events.back().usage().cached_tokens(), 12);

  // Turn 2 again, through a reservation: the handoff names the 12 tokens the node holds (the
  // prefill node skips their blocks).
  ReserveCall reserve(node, turn2, 3);
  v1::DecodeEvent handoff;
  ASSERT_TRUE(reserve.reader->Read(&handoff));
  ASSERT_TRUE(handoff.has_handoff());
  EXPECT_EQ(handoff.handoff().num_cached_tokens(), 12);
  WriteKv(node.backend, handoff.handoff(), turn2);
  SendCompletion(handoff.handoff(), /*ok=*/true, 9);
  ASSERT_TRUE(reserve.Finish().ok());

  const PrometheusText scrape = Scrape(node.metrics);
  EXPECT_EQ(PromptTokens(scrape, "generate"), 10 + 16);
  EXPECT_EQ(HitRequests(scrape, "generate"), 1);
  EXPECT_EQ(HitTokens(scrape, "generate"), 12);
  EXPECT_EQ(PromptTokens(scrape, "reserve"), 16);
  EXPECT_EQ(HitRequests(scrape, "reserve"), 1);
  EXPECT_EQ(HitTokens(scrape, "reserve"), 12);
  watch.context.TryCancel();
}

TEST(DecodeServiceKvEventsTest, ADrainEndsTheStreamsAndRefusesNewOnes) {
  DecodeNode node;
  KvEventsWatch watch(node);
  v1::KvEvents first;
  ASSERT_TRUE(watch.reader->Read(&first));
  const absl::Time began = absl::Now();
  node.service->BeginDrain(/*live_migration=*/false);
  v1::KvEvents events;
  while (watch.reader->Read(&events)) {
  }
  EXPECT_EQ(watch.reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_LT(absl::Now() - began, absl::Seconds(5));  // one publish interval, not the deadline

  KvEventsWatch late(node);
  EXPECT_FALSE(late.reader->Read(&events));
  EXPECT_EQ(late.reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace tandem
