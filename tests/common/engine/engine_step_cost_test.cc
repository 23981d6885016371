// What the engine reports for placement's cost model (engine.h, EngineStats): the price of a
// step fitted over the steps it ran (step_cost.h), the KV its sequences hold, its chunk budget,
// and the receipts of the requests routers placed on it (placement_receipts.h).
#include <memory>
#include <optional>
#include <vector>

#include "common/engine/engine.h"
#include "common/engine/placement_receipts.h"
#include "common/engine/request_stream.h"
#include "common/util/clock.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

// A step's true price on the manual clock: 700 µs + 3 µs per new token + 0.25 µs per context
// token (each chunk's computed tokens before it plus its own).
constexpr double kPerStepUs = 700;
constexpr double kPerTokenUs = 3;
constexpr double kPerContextTokenUs = 0.25;

// A FakeBackend whose every Forward takes the price above on a manual clock.
class PricedBackend : public FakeBackend {
 public:
  PricedBackend(ManualClock* clock, int num_blocks, int block_size)
      : FakeBackend(kVocab, num_blocks, block_size), clock_(clock) {}

  absl::Status Forward(const ForwardBatch& batch, LogitsOutput out) override {
    int64_t tokens = 0;
    int64_t context = 0;
    for (const ForwardItem& item : batch.items) {
      tokens += static_cast<int64_t>(item.tokens.size());
      context += item.start_pos + static_cast<int64_t>(item.tokens.size());
    }
    const double us = kPerStepUs + kPerTokenUs * tokens + kPerContextTokenUs * context;
    clock_->AdvanceNanos(static_cast<int64_t>(us * 1000));
    return FakeBackend::Forward(batch, out);
  }

 private:
  ManualClock* clock_;
};

std::unique_ptr<Engine> MakePricedEngine(Backend* backend, Clock* clock,
                                         std::vector<EngineStepStats>* steps) {
  EngineOptions options;
  options.scheduler.max_num_batched_tokens = 16;
  options.scheduler.max_num_seqs = 8;
  options.on_step = [steps](const EngineStepStats& s) { steps->push_back(s); };
  auto engine = Engine::Create(backend, options, clock);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(engine).value();
}

TEST(EngineStepCostTest, StepsOfKnownPriceGiveTheirCoefficients) {
  ManualClock clock;
  PricedBackend backend(&clock, 128, 4);
  std::vector<EngineStepStats> steps;
  auto engine = MakePricedEngine(&backend, &clock, &steps);
  EXPECT_FALSE(engine->Stats().step_cost.known());
  EXPECT_EQ(engine->Stats().max_num_batched_tokens, 16);

  // Prompts of several lengths, chunked by the budget of 16, then decodes of batches of several
  // sizes as the requests end one by one: steps with every mix of new and context tokens.
  std::vector<GenerateRequest> requests;
  for (int i = 0; i < 6; ++i)
    requests.push_back(GreedyRequest(MakePrompt(5 + 9 * i, i), 3 + 4 * i));
  const std::vector<GenerationResult> results = RunAll(*engine, std::move(requests));
  for (const GenerationResult& r : results) ASSERT_TRUE(r.status.ok()) << r.status;

  const EngineStats stats = engine->Stats();
  ASSERT_EQ(static_cast<int64_t>(steps.size()), stats.num_steps);
  EXPECT_GT(stats.step_cost.samples, 10);
  EXPECT_NEAR(stats.step_cost.per_step_us, kPerStepUs, 1e-3);
  EXPECT_NEAR(stats.step_cost.per_token_us, kPerTokenUs, 1e-4);
  EXPECT_NEAR(stats.step_cost.per_context_token_us, kPerContextTokenUs, 1e-5);

  // Each step's report carries the context it was priced on.
  for (const EngineStepStats& s : steps) {
    const double us = kPerStepUs + kPerTokenUs * s.num_tokens() +
                      kPerContextTokenUs * static_cast<double>(s.num_context_tokens);
    EXPECT_NEAR(static_cast<double>(s.duration_nanos), us * 1000, 1.0);
    EXPECT_GE(s.num_context_tokens, s.num_tokens());
  }
  // Everything ended: no KV is held.
  EXPECT_EQ(stats.num_context_tokens, 0);
}

TEST(EngineStepCostTest, FailedStepsAreNotPriced) {
  ManualClock clock;
  PricedBackend backend(&clock, 64, 4);
  std::vector<EngineStepStats> steps;
  auto engine = MakePricedEngine(&backend, &clock, &steps);
  backend.FailNextForward(absl::InternalError("injected"));
  RequestStream stream;
  GenerateRequest request = GreedyRequest(MakePrompt(6, 3), 3);
  request.on_event = stream.Callback();
  ASSERT_TRUE(engine->Submit(std::move(request)).ok());
  EXPECT_FALSE(engine->RunUntilIdle().ok());
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_FALSE(steps[0].ok);
  EXPECT_FALSE(engine->Stats().step_cost.known());
}

TEST(EngineStepCostTest, ContextTokensCountTheKvOfEverySequenceHeld) {
  ManualClock clock;
  PricedBackend backend(&clock, 64, 4);
  // While a request of a 9-token prompt decodes, its KV grows by one token a step; the stats
  // read inside on_step are those of the step just done.
  std::vector<int64_t> held;
  Engine* raw = nullptr;
  EngineOptions options;
  options.scheduler.max_num_batched_tokens = 16;
  options.scheduler.max_num_seqs = 8;
  options.on_step = [&](const EngineStepStats&) {
    held.push_back(raw->Stats().num_context_tokens);
  };
  auto created = Engine::Create(&backend, options, &clock);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<Engine> engine = *std::move(created);
  raw = engine.get();
  RunOne(*engine, GreedyRequest(MakePrompt(9, 1), 4));
  // Step 1 computed the prompt and sampled token 1 (10 tokens held); each decode adds one; the
  // last step's token ended the request.
  ASSERT_EQ(held.size(), 4u);
  EXPECT_EQ(held[0], 10);
  EXPECT_EQ(held[1], 11);
  EXPECT_EQ(held[2], 12);
  EXPECT_EQ(held[3], 0);

  // A decode node's reservation holds its prompt's KV (awaiting the writer's) too.
  std::optional<absl::StatusOr<KvReservation>> reserved;
  GenerateRequest reservation = GreedyRequest(MakePrompt(11, 2), 4);
  ASSERT_TRUE(engine
                  ->Reserve(std::move(reservation), absl::Seconds(30),
                            [&](absl::StatusOr<KvReservation> r) { reserved = std::move(r); })
                  .ok());
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  ASSERT_TRUE(reserved.has_value() && reserved->ok());
  EXPECT_EQ(engine->Stats().num_awaiting_kv, 1);
  EXPECT_EQ(engine->Stats().num_context_tokens, 11);
  engine->Cancel((*reserved)->request_id);
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  EXPECT_EQ(engine->Stats().num_context_tokens, 0);
}

TEST(EngineStepCostTest, CountsTheRequestsEachRouterPlaced) {
  FakeBackend backend(kVocab, 64, 4);
  auto engine = MakeEngine(&backend);
  EXPECT_TRUE(engine->Stats().receipts.empty());
  EXPECT_EQ(engine->Stats().max_receipts, PlacementReceipts::kDefaultCapacity);
  std::vector<GenerateRequest> requests;
  for (uint64_t router : {7, 9, 7, 0}) {  // 0: untagged, not counted
    GenerateRequest r = GreedyRequest(MakePrompt(5, static_cast<int>(router)), 2);
    r.placement = {.router_id = router, .seq = 1};
    requests.push_back(std::move(r));
  }
  RunAll(*engine, std::move(requests));
  // Reservations count too.
  GenerateRequest reservation = GreedyRequest(MakePrompt(6, 1), 2);
  reservation.placement = {.router_id = 9, .seq = 2};
  ASSERT_TRUE(
      engine
          ->Reserve(std::move(reservation), absl::Seconds(30), [](absl::StatusOr<KvReservation>) {})
          .ok());
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  EXPECT_EQ(engine->Stats().receipts,
            (std::vector<PlacementReceipt>{{.router_id = 7, .received = 2},
                                           {.router_id = 9, .received = 2}}));
}

TEST(PlacementReceiptsTest, KeepsTheRoutersSeenMostRecently) {
  PlacementReceipts receipts(/*capacity=*/2);
  receipts.Count({.router_id = 1, .seq = 1});
  receipts.Count({.router_id = 2, .seq = 1});
  receipts.Count({.router_id = 1, .seq = 2});
  const uint64_t version = receipts.version();
  receipts.Count({.router_id = 0, .seq = 5});  // untagged: nothing changes
  EXPECT_EQ(receipts.version(), version);
  // A third router: router 2, seen least recently, is forgotten.
  receipts.Count({.router_id = 3, .seq = 1});
  EXPECT_EQ(receipts.Snapshot(), (std::vector<PlacementReceipt>{{.router_id = 1, .received = 2},
                                                                {.router_id = 3, .received = 1}}));
  // Back again, it starts over.
  receipts.Count({.router_id = 2, .seq = 2});
  EXPECT_EQ(receipts.Snapshot(), (std::vector<PlacementReceipt>{{.router_id = 2, .received = 1},
                                                                {.router_id = 3, .received = 1}}));
}

}  // namespace
}  // namespace tandem
