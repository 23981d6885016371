#include "router/placement_cost.h"

#include <random>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "router/placement.h"

namespace tandem {
namespace {

constexpr StepCost kPrice{
    .per_step_us = 10'000, .per_token_us = 50, .per_context_token_us = 0.01, .samples = 100};

NodeCandidate CostCandidate(int index, int64_t queued, int64_t sequences, int64_t context) {
  NodeCandidate n;
  n.index = index;
  n.address = absl::StrCat("n", index);
  n.free_kv_blocks = 10'000;
  n.queued_tokens = queued;
  n.num_sequences = sequences;
  n.num_running = sequences;
  n.context_tokens = context;
  n.max_batched_tokens = 2048;
  n.block_size = 16;
  n.step_cost = kPrice;
  return n;
}

// A prefill node: a process of its own (an address no decode node has).
NodeCandidate PrefillNode(int index, int64_t queued, int64_t sequences, int64_t context) {
  NodeCandidate n = CostCandidate(index, queued, sequences, context);
  n.address = absl::StrCat("p", index);
  return n;
}

PlacementOptions CostOptions(ServingMode mode = ServingMode::kDisaggregated) {
  PlacementOptions o;
  o.policy = PlacementPolicy::kCost;
  o.mode = mode;
  o.slo_ttft_ms = 1000;
  o.slo_tpot_ms = 50;
  return o;
}

TEST(PlacementCostTest, PrefillTimeIsTheQueueAndThePromptInChunkedSteps) {
  const NodeCandidate n = CostCandidate(0, 1000, 0, 0);
  // 4,000 tokens in steps of 2,048: 2 steps of 10 ms, 4,000 × 50 µs, the prompt's two chunks
  // read 2,048 + 3,000 KV tokens at 0.01 µs, and the 1,000 queued ahead read at least themselves.
  EXPECT_DOUBLE_EQ(PrefillTimeUs(n, kPrice, kPrice.per_token_us, 0, 3000, false),
                   2 * 10'000 + 4000 * 50 + (2048 + 3000 + 1000) * 0.01);
  // A cached prefix of 512 tokens is read by every chunk.
  EXPECT_DOUBLE_EQ(PrefillTimeUs(n, kPrice, kPrice.per_token_us, 512, 3000, false),
                   2 * 10'000 + 4000 * 50 + (2 * 512 + 2048 + 3000 + 1000) * 0.01);
  EXPECT_EQ(PrefillTimeUs(CostCandidate(0, 0, 0, 0), kPrice, kPrice.per_token_us, 100, 0, false),
            0);
}

TEST(PlacementCostTest, LocalPrefillSharesItsStepsWithTheDecodingBatch) {
  const NodeCandidate d = CostCandidate(0, 0, 48, 48'000);
  // The budget left beside 48 decoding sequences is 2,000 tokens: one step of the batch plus
  // the prompt's tokens and reads.
  EXPECT_DOUBLE_EQ(PrefillTimeUs(d, kPrice, kPrice.per_token_us, 0, 2000, true),
                   (10'000 + 48 * 50 + 48'000 * 0.01) + 2000 * 50 + 2000 * 0.01);
}

TEST(PlacementCostTest, DecodeTpotCountsTheNewSequenceItsKvAndTheQueuedPrompts) {
  NodeCandidate d = CostCandidate(0, 400, 9, 9000);
  const CostRequest r{.prompt_tokens = 1000, .max_tokens = 200};
  EXPECT_DOUBLE_EQ(DecodeTpotUs(d, kPrice, kPrice.per_token_us, r),
                   10'000 + 10 * 50 + (9000 + 1000 + 100) * 0.01 + 400 * 50.0 / 200);
  EXPECT_DOUBLE_EQ(CurrentTpotUs(d, kPrice), 10'000 + 9 * 50 + 9000 * 0.01);
  EXPECT_EQ(CurrentTpotUs(CostCandidate(0, 0, 0, 0), kPrice), 0);
}

TEST(PlacementCostTest, ScoreIsTheWorseRatioPlusAQuarterOfBoth) {
  const PlacementOptions o = CostOptions();
  EXPECT_DOUBLE_EQ(Score({.ttft_us = 500'000, .tpot_us = 40'000}, o), 0.8 + 0.25 * (0.5 + 0.8));
  // The running batch's TPOT counts when it is the worse.
  EXPECT_DOUBLE_EQ(Score({.ttft_us = 100'000, .tpot_us = 10'000, .others_tpot_us = 60'000}, o),
                   1.2 + 0.25 * (0.1 + 1.2));
  NodeCandidate d = CostCandidate(0, 0, 0, 0);
  d.free_kv_blocks = 10;
  EXPECT_TRUE(HasRoomFor(d, {.prompt_tokens = 100, .max_tokens = 60}));
  EXPECT_FALSE(HasRoomFor(d, {.prompt_tokens = 100, .max_tokens = 61}));
}

TEST(PlacementCostTest, TheLastChunksTransferAndTheHopsAddToDisaggregatedTtft) {
  PlacementOptions o = CostOptions();
  o.disaggregation_hop_us = 300;
  o.kv_bytes_per_token = 131'072;  // Llama-3.1-8B in bf16
  o.kv_link_gbps = 400;
  const NodeCandidate p = CostCandidate(0, 0, 0, 0);
  const NodeCandidate d = CostCandidate(1, 0, 0, 0);
  const CostRequest r{.prompt_tokens = 3000, .max_tokens = 100};
  const PredictedCost c = PredictDisaggregated(p, kPrice, d, kPrice, r, o);
  // The prompt's last chunk (3,000 − 2,048 = 952 tokens) crosses the link after the prefill
  // ends; the first overlapped with the second's compute.
  EXPECT_DOUBLE_EQ(c.ttft_us, PrefillTimeUs(p, kPrice, kPrice.per_token_us, 0, 3000, false) + 300 +
                                  952.0 * 131'072 * 8 / 400e3);
  EXPECT_EQ(c.others_tpot_us, 0);  // nobody decodes there yet
}

TEST(PlacementCostTest, ThePrefillNodesReportedKvBytesPerTokenPricesTheTransfer) {
  PlacementOptions o = CostOptions();
  o.kv_bytes_per_token = 131'072;  // the options' stand-in, for nodes that report none
  o.kv_link_gbps = 100;
  NodeCandidate p = PrefillNode(0, 0, 0, 0);
  const NodeCandidate d = CostCandidate(1, 0, 0, 0);
  const CostRequest r{.prompt_tokens = 100, .max_tokens = 10};
  const double compute = PrefillTimeUs(p, kPrice, kPrice.per_token_us, 0, 100, false);
  EXPECT_DOUBLE_EQ(PredictDisaggregated(p, kPrice, d, kPrice, r, o).ttft_us,
                   compute + 100.0 * 131'072 * 8 / 100e3);
  p.kv_bytes_per_token = 32'768;  // e.g. its KV cache in fp8
  EXPECT_DOUBLE_EQ(PredictDisaggregated(p, kPrice, d, kPrice, r, o).ttft_us,
                   compute + 100.0 * 32'768 * 8 / 100e3);
  o.kv_link_gbps = 0;  // no link rate: not counted
  EXPECT_DOUBLE_EQ(PredictDisaggregated(p, kPrice, d, kPrice, r, o).ttft_us, compute);
}

// The prefill node skips the blocks the decode node holds and sends the rest: a prefix it had
// cached but the decode node lacks crosses the link too, hidden only behind the compute before
// the last chunk.
TEST(PlacementCostTest, TheKvTheDecodeNodeLacksCrossesTheLink) {
  PlacementOptions o = CostOptions();
  o.kv_bytes_per_token = 131'072;
  o.kv_link_gbps = 400;
  const double us = 131'072.0 * 8 / 400e3;  // per token
  NodeCandidate p = PrefillNode(0, 0, 0, 0);
  p.cached_prefix_tokens = 3800;
  NodeCandidate d = CostCandidate(1, 0, 0, 0);
  const CostRequest r{.prompt_tokens = 4000, .max_tokens = 100};
  const double compute = PrefillTimeUs(p, kPrice, kPrice.per_token_us, 3800, 200, false);
  // Nothing computes before the last (only) chunk: all 4,000 tokens' KV is exposed.
  EXPECT_DOUBLE_EQ(PredictDisaggregated(p, kPrice, d, kPrice, r, o).ttft_us, compute + 4000 * us);
  d.cached_prefix_tokens = 2000;
  EXPECT_DOUBLE_EQ(PredictDisaggregated(p, kPrice, d, kPrice, r, o).ttft_us, compute + 2000 * us);
  d.cached_prefix_tokens = 3800;  // the holder: only the new part
  EXPECT_DOUBLE_EQ(PredictDisaggregated(p, kPrice, d, kPrice, r, o).ttft_us, compute + 200 * us);
  // On a slow link the chunks before the last hide only their compute's worth: 3,000 tokens
  // uncached, a first chunk of 2,048 computed while its KV goes (10 ms + 2,048 × 50 µs + its
  // reads), then the last 952.
  const double slow = 131'072.0 * 8 / 1e3;  // 1 Gb/s
  const double first_chunk = 10'000 + 2048 * 50 + 2048 * 0.01;
  EXPECT_DOUBLE_EQ(ExposedTransferUs(p, kPrice, 0, 0, 3000, slow),
                   2048 * slow - first_chunk + 952 * slow);
  // ... and a fast one hides them whole.
  EXPECT_DOUBLE_EQ(ExposedTransferUs(p, kPrice, 0, 0, 3000, us), 952 * us);
}

// A conversation's next turn, its history cached on the prefill node and on one decode node:
// where TTFT binds, the holder wins it even at a 5 % higher step price, because elsewhere the
// history's KV would cross the link first. Without a link rate the transfer is invisible and the
// cheaper node takes it.
TEST(PlacementCostTest, ANextTurnStaysWhereItsHistoryIsWhenTheTransferCostsTtft) {
  PlacementOptions o = CostOptions();
  o.slo_ttft_ms = 40;
  o.kv_bytes_per_token = 131'072;
  o.kv_link_gbps = 400;
  std::vector<NodeCandidate> prefill = {PrefillNode(0, 0, 0, 0)};
  prefill[0].cached_prefix_tokens = 3800;
  std::vector<NodeCandidate> decode = {CostCandidate(0, 0, 0, 0), CostCandidate(1, 0, 0, 0)};
  decode[0].cached_prefix_tokens = 3800;
  decode[0].step_cost.per_step_us *= 1.05;
  for (int i = 0; i < 10; ++i) {
    auto p = Placer(o).Choose(prefill, decode, 4000, 100);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->decode, 0);
  }
  o.kv_link_gbps = 0;
  auto p = Placer(o).Choose(prefill, decode, 4000, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->decode, 1);
}

TEST(PlacementCostTest, LongPromptsGoToThePrefillPoolWhenTheDecodeNodeIsBusy) {
  const Placer placer(CostOptions());
  const std::vector<NodeCandidate> prefill = {PrefillNode(0, 0, 0, 0)};
  const std::vector<NodeCandidate> decode = {CostCandidate(0, 0, 64, 200'000)};
  auto p = placer.Choose(prefill, decode, 8000, 200);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kDisaggregated);
  EXPECT_EQ(p->reason, PlacementReason::kDisaggregated);
  EXPECT_EQ(p->prefill, 0);
}

TEST(PlacementCostTest, PromptsPrefillLocallyWhenThePrefillPoolIsBackedUp) {
  const Placer placer(CostOptions());
  const std::vector<NodeCandidate> prefill = {PrefillNode(0, 40'000, 8, 0)};  // 2 s of queue
  const std::vector<NodeCandidate> decode = {CostCandidate(0, 0, 2, 2000)};
  auto p = placer.Choose(prefill, decode, 1000, 200);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kLocalPrefill);
  EXPECT_EQ(p->reason, PlacementReason::kCheaperLocal);
}

// A local prefill that the model scores better is still refused where the disaggregated option's
// TPOT, not its TTFT, is the binding target (the local prefill's stall would spend the scarce
// one to save the plentiful one), unless the decode node holds half the prompt.
TEST(PlacementCostTest, LocalPrefillOnlyWhereTtftBindsOrTheDecodeNodeHoldsHalfThePrompt) {
  const PlacementOptions o = CostOptions();
  const Placer placer(o);
  const std::vector<NodeCandidate> prefill = {PrefillNode(0, 3000, 0, 0)};  // ~0.2 s queued
  std::vector<NodeCandidate> decode = {CostCandidate(0, 0, 8, 8000)};
  const CostRequest r{.prompt_tokens = 200, .max_tokens = 100};
  const double token_us = LocalPromptTokenUs(kPrice, kPrice, 2048);
  const PredictedCost split = PredictDisaggregated(prefill[0], kPrice, decode[0], kPrice, r, o);
  const PredictedCost local = PredictLocal(decode[0], kPrice, token_us, r, o);
  // The premise: the model prefers the local prefill, and the split's TPOT ratio binds.
  ASSERT_LT(local.score, split.score);
  ASSERT_LT(split.ttft_us / 1e6, std::max(split.tpot_us, split.others_tpot_us) / 50e3);
  auto p = placer.Choose(prefill, decode, 200, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kDisaggregated);

  decode[0].cached_prefix_tokens = 100;  // half the prompt: the next turn of its conversation
  p = placer.Choose(prefill, decode, 200, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kLocalPrefill);
  EXPECT_EQ(p->reason, PlacementReason::kCheaperLocal);
}

TEST(PlacementCostTest, TheDecodeNodesCachedConversationAttractsTheNextTurn) {
  const Placer placer(CostOptions(ServingMode::kColocated));
  std::vector<NodeCandidate> decode = {CostCandidate(0, 0, 4, 8000), CostCandidate(1, 0, 4, 8000)};
  decode[1].cached_prefix_tokens = 3800;
  for (int i = 0; i < 20; ++i) {
    auto p = placer.Choose({}, decode, 4000, 100);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->decode, 1);
    EXPECT_EQ(p->kind, PlacementKind::kColocated);
  }
}

TEST(PlacementCostTest, NearEqualNodesShareTheLoadAndTheSeedRepeatsIt) {
  std::vector<NodeCandidate> decode;
  for (int i = 0; i < 8; ++i) decode.push_back(CostCandidate(i, 0, 0, 0));
  auto run = [&](uint64_t seed) {
    PlacementOptions o = CostOptions(ServingMode::kColocated);
    o.seed = seed;
    const Placer placer(o);
    std::vector<int> picks;
    for (int i = 0; i < 40; ++i) picks.push_back(placer.Choose({}, decode, 100, 10)->decode);
    return picks;
  };
  const std::vector<int> a = run(7);
  EXPECT_EQ(a, run(7));
  EXPECT_NE(a, run(8));
  EXPECT_GE(std::set<int>(a.begin(), a.end()).size(), 6u);
}

TEST(PlacementCostTest, WithoutPricesNodesRankByLoadAndTheThresholdDecidesTheKind) {
  PlacementOptions o = CostOptions();
  o.local_prefill_threshold = 512;
  const Placer placer(o);
  std::vector<NodeCandidate> prefill = {PrefillNode(0, 5000, 2, 0), PrefillNode(1, 100, 1, 0)};
  std::vector<NodeCandidate> decode = {CostCandidate(0, 0, 30, 0), CostCandidate(1, 0, 3, 0)};
  for (auto* pool : {&prefill, &decode}) {
    for (NodeCandidate& n : *pool) n.step_cost = StepCost{};
  }
  auto long_prompt = placer.Choose(prefill, decode, 4000, 100);
  ASSERT_TRUE(long_prompt.ok());
  EXPECT_EQ(long_prompt->kind, PlacementKind::kDisaggregated);
  EXPECT_EQ(long_prompt->prefill, 1);
  EXPECT_EQ(long_prompt->decode, 1);
  auto short_prompt = placer.Choose(prefill, decode, 100, 100);
  ASSERT_TRUE(short_prompt.ok());
  EXPECT_EQ(short_prompt->kind, PlacementKind::kLocalPrefill);
  EXPECT_EQ(short_prompt->reason, PlacementReason::kShortPrompt);
}

// Fresh full chunks teach a prefill node one number, a chunk's time: its fit may put it in
// per_step, per_token or per_context alone (tokens and context are the same count). Every
// decomposition prices a queue of whole prompts the same, so the node with the shorter queue
// wins whichever way each node's fit came out.
TEST(PlacementCostTest, APrefillQueueCostsTheSameWhicheverTermTheFitChose) {
  const StepCost per_step{.per_step_us = 204'800, .samples = 100};
  const StepCost per_token{.per_token_us = 100, .samples = 100};
  const StepCost per_context{.per_context_token_us = 100, .samples = 100};
  for (const StepCost& price : {per_step, per_token, per_context}) {
    NodeCandidate n = CostCandidate(0, 4096, 0, 0);
    n.max_batched_tokens = 2048;
    // Two queued prompts and this one: three chunks of 2,048, 204.8 ms each.
    EXPECT_NEAR(PrefillTimeUs(n, price, price.per_token_us, 0, 2048, false), 3 * 204'800, 1e-6);
    EXPECT_NEAR(LocalPromptTokenUs(StepCost{.samples = 1}, price, 2048), 100, 1e-9);
  }
  // A node whose fit chose per_context looked idle behind any queue when the queue read
  // nothing: four prompts ahead of it cost no more than one ahead of a per_step node.
  const NodeCandidate long_queue = CostCandidate(0, 8192, 0, 0);
  const NodeCandidate short_queue = CostCandidate(1, 2048, 0, 0);
  EXPECT_GT(PrefillTimeUs(long_queue, per_context, 0, 0, 2048, false),
            PrefillTimeUs(short_queue, per_step, 0, 0, 2048, false) + 2 * 204'800);
}

TEST(PlacementCostTest, ADecodeNodeThatOnlyDecodedPricesAPromptAtThePrefillPoolsRate) {
  // Steps of one token per sequence teach a decode node no per-token price.
  const StepCost decode_only{.per_step_us = 10'000, .per_context_token_us = 0.01, .samples = 100};
  // A prefill node's token in a full fresh chunk of 2,000: 50 + 0.01 (its own position) +
  // 10,000 / 2,000 µs.
  EXPECT_DOUBLE_EQ(LocalPromptTokenUs(decode_only, kPrice, 2000), 55.01);
  EXPECT_DOUBLE_EQ(LocalPromptTokenUs(kPrice, decode_only, 2000), 50);  // its own is larger
  const StepCost big_token{.per_step_us = 1, .per_token_us = 200, .samples = 10};
  EXPECT_DOUBLE_EQ(LocalPromptTokenUs(big_token, kPrice, 2000), 200);
  EXPECT_EQ(LocalPromptTokenUs(decode_only, StepCost{}, 2000), 0);
  // Full-chunk steps alone: the prefill node's fit put a chunk's whole cost in per_step.
  const StepCost full_chunks{.per_step_us = 100'000, .samples = 100};
  EXPECT_DOUBLE_EQ(LocalPromptTokenUs(decode_only, full_chunks, 2048), 100'000.0 / 2048);
  const Placer placer(CostOptions());
  const std::vector<NodeCandidate> prefill = {PrefillNode(0, 0, 0, 0)};
  std::vector<NodeCandidate> decode = {CostCandidate(0, 0, 2, 2000)};
  decode[0].step_cost = decode_only;
  // Locally the 4,000-token prompt would cost as much compute as on the idle prefill node and
  // stall the two running sequences: it goes to the prefill node (with its own price, the
  // decode node would have called the prompt free: 2 steps of 10 ms).
  auto p = placer.Choose(prefill, decode, 4000, 200);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, PlacementKind::kDisaggregated);
}

TEST(PlacementCostTest, AmongNearEqualDecodeNodesTheOneHoldingThePromptWins) {
  std::vector<NodeCandidate> decode = {CostCandidate(0, 0, 40, 100'000),
                                       CostCandidate(1, 0, 40, 100'000),
                                       CostCandidate(2, 0, 40, 100'000)};
  decode[2].cached_prefix_tokens = 1024;  // e.g. the conversation's first turn
  const std::vector<NodeCandidate> prefill = {PrefillNode(0, 0, 0, 0)};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    PlacementOptions o = CostOptions();
    o.seed = seed;
    auto p = Placer(o).Choose(prefill, decode, 1100, 100);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->decode, 2) << "seed " << seed;
    EXPECT_EQ(p->decode_cached_prefix_tokens, 1024);
  }
}

// Equally priced nodes (each computing one prompt, none queued) go least recently used first:
// the one given a prompt longest ago is the nearest to done, which its report cannot say. The
// seed does not matter then; it still breaks exact ties (never placed).
TEST(PlacementCostTest, AmongNearEqualNodesTheLeastRecentlyUsedWins) {
  std::vector<NodeCandidate> prefill;
  for (int i = 0; i < 4; ++i) prefill.push_back(PrefillNode(i, 2048, 1, 2048));
  prefill[0].last_placed_ns = 400;
  prefill[1].last_placed_ns = 100;  // the oldest
  prefill[2].last_placed_ns = 300;
  prefill[3].last_placed_ns = 200;
  std::vector<NodeCandidate> decode = {CostCandidate(0, 0, 10, 20'000),
                                       CostCandidate(1, 0, 10, 20'000)};
  decode[0].last_placed_ns = 50;
  decode[1].last_placed_ns = 20;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    PlacementOptions o = CostOptions();
    o.seed = seed;
    absl::StatusOr<Placement> p = Placer(o).Choose(prefill, decode, 1000, 100);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->kind, PlacementKind::kDisaggregated);
    EXPECT_EQ(p->prefill, 1) << "seed " << seed;
    EXPECT_EQ(p->decode, 1) << "seed " << seed;
  }
  // A shorter queue still wins over an older placement: the order only breaks near-ties.
  prefill[2].queued_tokens = 0;
  prefill[2].num_sequences = 0;
  absl::StatusOr<Placement> p = Placer(CostOptions()).Choose(prefill, decode, 1000, 100);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->prefill, 2);
}

// Property: where every node is in both pools (an auto cluster), a disaggregated placement never
// pairs a node with itself; a single node prefills locally.
TEST(PlacementCostTest, ANodeInBothPoolsIsNeverItsOwnPrefillNode) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 1000; ++trial) {
    PlacementOptions o = CostOptions();
    o.seed = trial;
    const Placer placer(o);
    std::vector<NodeCandidate> nodes;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      nodes.push_back(CostCandidate(i, static_cast<int64_t>(rng() % 20'000), rng() % 64,
                                    static_cast<int64_t>(rng() % 200'000)));
    }
    auto p = placer.Choose(nodes, nodes, 1 + static_cast<int64_t>(rng() % 6000), 100);
    ASSERT_TRUE(p.ok());
    if (p->kind == PlacementKind::kDisaggregated) {
      EXPECT_NE(p->prefill, p->decode) << "trial " << trial;
    } else {
      EXPECT_EQ(p->prefill, -1);
    }
    if (n == 1) {
      EXPECT_EQ(p->kind, PlacementKind::kLocalPrefill) << "trial " << trial;
    }
  }
}

// Property: over random clusters, the choice is always one of the candidates, and never a decode
// node without room while another has room.
TEST(PlacementCostTest, NeverPicksAFullNodeWhileAnotherHasRoom) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 2000; ++trial) {
    const ServingMode mode = trial % 2 ? ServingMode::kColocated : ServingMode::kDisaggregated;
    PlacementOptions o = CostOptions(mode);
    o.seed = trial;
    const Placer placer(o);
    std::vector<NodeCandidate> prefill, decode;
    const int np = static_cast<int>(rng() % 4);
    const int nd = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < np; ++i) {
      prefill.push_back(PrefillNode(10 + i, static_cast<int64_t>(rng() % 50'000), rng() % 8, 0));
    }
    for (int i = 0; i < nd; ++i) {
      NodeCandidate d = CostCandidate(20 + i, static_cast<int64_t>(rng() % 8000), rng() % 128,
                                      static_cast<int64_t>(rng() % 500'000));
      d.free_kv_blocks = static_cast<int64_t>(rng() % 600);
      d.cached_prefix_tokens = static_cast<int64_t>(rng() % 2000);
      if (rng() % 3 == 0) d.step_cost = StepCost{};
      decode.push_back(d);
    }
    const CostRequest r{.prompt_tokens = 1 + static_cast<int64_t>(rng() % 6000),
                        .max_tokens = 1 + static_cast<int64_t>(rng() % 1000)};
    auto p = placer.Choose(prefill, decode, r.prompt_tokens, r.max_tokens);
    ASSERT_TRUE(p.ok());
    bool any_room = false;
    const NodeCandidate* chosen = nullptr;
    for (const NodeCandidate& d : decode) {
      any_room |= HasRoomFor(d, r);
      if (d.index == p->decode) chosen = &d;
    }
    ASSERT_NE(chosen, nullptr) << "trial " << trial;
    if (any_room) {
      EXPECT_TRUE(HasRoomFor(*chosen, r)) << "trial " << trial;
    }
    if (p->kind == PlacementKind::kDisaggregated) {
      EXPECT_TRUE(p->prefill >= 10 && p->prefill < 10 + np) << "trial " << trial;
    } else {
      EXPECT_EQ(p->prefill, -1);
    }
    if (mode == ServingMode::kColocated) {
      EXPECT_EQ(p->kind, PlacementKind::kColocated);
    }
  }
}

}  // namespace
}  // namespace tandem
