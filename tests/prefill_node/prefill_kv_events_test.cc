// A prefill node's WatchKvEvents (common/serving/kv_events_publisher.h, shared with the decode
// node): a prefilled prompt's blocks are published after the reset, and StopKvEvents (the node
// drains) ends the stream UNAVAILABLE within a publish interval and refuses new ones, so the
// router's stream does not hold the node's shutdown until its drain deadline.
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/time/clock.h"
#include "common/kv/block_hash.h"
#include "gtest/gtest.h"
#include "tests/prefill_node/prefill_test_nodes.h"

namespace tandem {
namespace {

using ::tandem::testing::FakeDecodeNode;
using ::tandem::testing::PrefillNode;
using ::tandem::testing::WatchCall;

TEST(PrefillKvEventsTest, PublishesAPrefilledPromptThenStopsWhenTheNodeDrains) {
  FakeDecodeNode decode;
  PrefillNode prefill;
  WatchCall watch(prefill);
  v1::KvEvents events;
  ASSERT_TRUE(watch.reader->Read(&events));
  EXPECT_TRUE(events.reset());
  EXPECT_EQ(events.block_size(), 4);
  EXPECT_EQ(events.incarnation(), prefill.transport.incarnation());

  const std::vector<int> prompt = MakePrompt(9, 3);  // 2 full blocks of 4, and 1 token
  v1::PrefillResponse response;
  ASSERT_TRUE(prefill.Prefill(prompt, decode.Handoff(1, {0, 1, 2}), &response).ok());
  const std::vector<uint64_t> hashes =
      HashFullBlocks(std::vector<TokenId>(prompt.begin(), prompt.end()), 4);
  absl::flat_hash_set<uint64_t> view;
  while (!view.contains(hashes[0]) || !view.contains(hashes[1])) {
    ASSERT_TRUE(watch.reader->Read(&events)) << "the prompt's blocks were never published";
    EXPECT_FALSE(events.reset());
    for (uint64_t h : events.stored()) view.insert(h);
  }

  const absl::Time began = absl::Now();
  prefill.service->StopKvEvents();
  while (watch.reader->Read(&events)) {
  }
  EXPECT_EQ(watch.reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_LT(absl::Now() - began, absl::Seconds(5));
  WatchCall late(prefill);
  EXPECT_FALSE(late.reader->Read(&events));
  EXPECT_EQ(late.reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace tandem
