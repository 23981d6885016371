// DecodeService's GetLoad carries what placement's cost model reads (the price of a step, the KV
// held, the chunk budget) and the receipts of the requests each router tagged: a request counted
// in a report's receipts is in that report's load.
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/decode_node/decode_test_node.h"

namespace tandem {
namespace {

using ::tandem::testing::DecodeNode;
using ::tandem::testing::DecodeStreamReader;

v1::NodeLoad GetLoad(DecodeNode& node) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::NodeLoad load;
  EXPECT_TRUE(node.stub->GetLoad(&context, v1::LoadRequest(), &load).ok());
  return load;
}

int64_t Received(const v1::NodeLoad& load, uint64_t router_id) {
  for (const v1::RouterReceipt& r : load.receipts()) {
    if (r.router_id() == router_id) return r.received();
  }
  return 0;
}

v1::PlacementTag Tag(uint64_t router_id, uint64_t seq) {
  v1::PlacementTag tag;
  tag.set_router_id(router_id);
  tag.set_seq(seq);
  return tag;
}

TEST(DecodeServiceLoadTest, ReportsReceiptsWithTheLoadTheyCount) {
  DecodeNode node;
  v1::NodeLoad load = GetLoad(node);
  EXPECT_EQ(load.receipts_size(), 0);
  EXPECT_EQ(load.max_router_receipts(), 64);
  EXPECT_EQ(load.max_num_batched_tokens(), node.engine->options().scheduler.max_num_batched_tokens);
  EXPECT_EQ(load.kv_bytes_per_token(),
            static_cast<int64_t>(node.engine->kv_layout().bytes_per_token()));
  EXPECT_GT(load.kv_bytes_per_token(), 0);
  EXPECT_EQ(load.step_cost().samples(), 0);

  // Router 42: a reservation (it stays awaiting its KV) and a local generation; router 7: a local
  // generation; one untagged.
  const std::vector<int> reserved_prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  DecodeStreamReader reserve;
  v1::ReserveRequest r = DecodeStreamReader::MakeRequest<v1::ReserveRequest>(reserved_prompt, 4);
  r.set_request_id("r1");
  *r.mutable_placement() = Tag(42, 1);
  reserve.reader = node.stub->Reserve(&reserve.context, r);
  v1::DecodeEvent handoff;
  ASSERT_TRUE(reserve.reader->Read(&handoff));
  ASSERT_TRUE(handoff.has_handoff());

  std::vector<std::unique_ptr<DecodeStreamReader>> generations;
  for (auto [router, seq, id] :
       {std::tuple<uint64_t, uint64_t, const char*>{42, 2, "g1"}, {7, 1, "g2"}, {0, 0, "g3"}}) {
    auto call = std::make_unique<DecodeStreamReader>();
    v1::NodeGenerateRequest g =
        DecodeStreamReader::MakeRequest<v1::NodeGenerateRequest>({3, 1, 4, 1, 5}, 3);
    g.set_request_id(id);
    if (router != 0) *g.mutable_placement() = Tag(router, seq);
    call->reader = node.stub->Generate(&call->context, g);
    generations.push_back(std::move(call));
  }
  // While they arrive, every report that counts a request shows it (waiting, running, awaiting
  // its KV, or finished).
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  do {
    load = GetLoad(node);
    const int64_t counted = Received(load, 42) + Received(load, 7);
    const int64_t shown = load.num_waiting() + load.num_running() + load.num_awaiting_kv() +
                          load.num_finished_requests();
    EXPECT_GE(shown, counted);
  } while ((Received(load, 42) < 2 || Received(load, 7) < 1) && absl::Now() < give_up);
  EXPECT_EQ(Received(load, 42), 2);
  EXPECT_EQ(Received(load, 7), 1);
  EXPECT_EQ(load.receipts_size(), 2);

  for (auto& call : generations) ASSERT_TRUE(call->Finish().ok());
  load = GetLoad(node);
  // The generations ran steps: the node has a price. The reservation's prompt is still held.
  EXPECT_GT(load.step_cost().samples(), 0);
  EXPECT_EQ(load.num_awaiting_kv(), 1);
  EXPECT_EQ(load.num_context_tokens(), static_cast<int64_t>(reserved_prompt.size()));
  reserve.context.TryCancel();
  reserve.Finish();
}

}  // namespace
}  // namespace tandem
