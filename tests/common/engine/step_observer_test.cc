// EngineOptions::on_step (one report per step, split into prefill and decode work, timed on the
// engine's clock) and the queue time of imported requests.
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "common/engine/engine.h"
#include "common/engine/request_stream.h"
#include "common/util/clock.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

// A FakeBackend whose every Forward takes `step` on a manual clock.
class TimedBackend : public FakeBackend {
 public:
  TimedBackend(ManualClock* clock, absl::Duration step, int num_blocks, int block_size)
      : FakeBackend(kVocab, num_blocks, block_size), clock_(clock), step_(step) {}

  absl::Status Forward(const ForwardBatch& batch, LogitsOutput out) override {
    clock_->AdvanceNanos(absl::ToInt64Nanoseconds(step_));
    return FakeBackend::Forward(batch, out);
  }

 private:
  ManualClock* clock_;
  absl::Duration step_;
};

struct Recorder {
  std::vector<EngineStepStats> steps;
  std::function<void(const EngineStepStats&)> Callback() {
    return [this](const EngineStepStats& s) { steps.push_back(s); };
  }
  int64_t Sum(int32_t (EngineStepStats::*field)() const) const {
    int64_t total = 0;
    for (const EngineStepStats& s : steps) total += (s.*field)();
    return total;
  }
};

std::unique_ptr<Engine> MakeObservedEngine(Backend* backend, Recorder* recorder, Clock* clock,
                                           int max_num_batched_tokens) {
  EngineOptions options;
  options.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  options.scheduler.max_num_seqs = std::min(8, max_num_batched_tokens);
  options.on_step = recorder->Callback();
  auto engine = Engine::Create(backend, options, clock);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(engine).value();
}

TEST(StepObserverTest, ReportsEveryStepSplitIntoChunkedPrefillAndDecodes) {
  ManualClock clock;
  TimedBackend backend(&clock, absl::Milliseconds(3), 32, 4);
  Recorder recorder;
  auto engine = MakeObservedEngine(&backend, &recorder, &clock, /*max_num_batched_tokens=*/4);
  // 9 prompt tokens in chunks of 4, 4, 1 (a one-token chunk of the prompt is prefill); then 5
  // more tokens, one decode step each.
  GenerationResult r = RunOne(*engine, GreedyRequest(MakePrompt(9, 1), 6));
  ASSERT_EQ(r.tokens.size(), 6u);

  const EngineStats stats = engine->Stats();
  ASSERT_EQ(static_cast<int64_t>(recorder.steps.size()), stats.num_steps);
  ASSERT_EQ(recorder.steps.size(), 8u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(recorder.steps[i].num_prefill_seqs, 1) << i;
    EXPECT_EQ(recorder.steps[i].num_decode_seqs, 0) << i;
  }
  EXPECT_EQ(recorder.steps[0].num_prefill_tokens, 4);
  EXPECT_EQ(recorder.steps[2].num_prefill_tokens, 1);
  for (int i = 3; i < 8; ++i) {
    EXPECT_EQ(recorder.steps[i].num_prefill_seqs, 0) << i;
    EXPECT_EQ(recorder.steps[i].num_decode_seqs, 1) << i;
    EXPECT_EQ(recorder.steps[i].num_decode_tokens, 1) << i;
  }
  EXPECT_EQ(recorder.Sum(&EngineStepStats::num_tokens), stats.num_batched_tokens);
  for (const EngineStepStats& s : recorder.steps) {
    EXPECT_TRUE(s.ok);
    EXPECT_EQ(s.duration_nanos, 3'000'000);  // the backend's time on the engine's clock
    EXPECT_EQ(s.num_preempted, 0);
  }
}

TEST(StepObserverTest, MixedStepsCountBothKinds) {
  ManualClock clock;
  TimedBackend backend(&clock, absl::Milliseconds(1), 64, 4);
  Recorder recorder;
  auto engine = MakeObservedEngine(&backend, &recorder, &clock, /*max_num_batched_tokens=*/64);
  // The second request arrives once the first one decodes: their steps mix.
  RequestStream second;
  bool submitted = false;
  GenerateRequest first = GreedyRequest(MakePrompt(5, 1), 4);
  RequestStream first_stream;
  first.on_event = [&](const GenerationEvent& e) {
    first_stream.Push(e);
    if (!submitted) {
      submitted = true;
      GenerateRequest next = GreedyRequest(MakePrompt(7, 2), 2);
      next.on_event = second.Callback();
      EXPECT_TRUE(engine->Submit(std::move(next)).ok());
    }
  };
  ASSERT_TRUE(engine->Submit(std::move(first)).ok());
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  ASSERT_TRUE(first_stream.finished());
  ASSERT_TRUE(second.finished());

  ASSERT_GE(recorder.steps.size(), 2u);
  // Step 2: the first request's decode and the second request's whole prompt.
  EXPECT_EQ(recorder.steps[1].num_decode_seqs, 1);
  EXPECT_EQ(recorder.steps[1].num_decode_tokens, 1);
  EXPECT_EQ(recorder.steps[1].num_prefill_seqs, 1);
  EXPECT_EQ(recorder.steps[1].num_prefill_tokens, 7);
  EXPECT_EQ(recorder.steps[1].num_seqs(), 2);
  const EngineStats stats = engine->Stats();
  EXPECT_EQ(static_cast<int64_t>(recorder.steps.size()), stats.num_steps);
  EXPECT_EQ(recorder.Sum(&EngineStepStats::num_tokens), stats.num_batched_tokens);
  // Decodes: 3 of the first request, 1 of the second.
  int64_t decode_tokens = 0;
  for (const EngineStepStats& s : recorder.steps) decode_tokens += s.num_decode_tokens;
  EXPECT_EQ(decode_tokens, 4);
}

TEST(StepObserverTest, FailedStepIsReportedOnce) {
  ManualClock clock;
  TimedBackend backend(&clock, absl::Milliseconds(1), 32, 4);
  Recorder recorder;
  auto engine = MakeObservedEngine(&backend, &recorder, &clock, /*max_num_batched_tokens=*/64);
  backend.FailNextForward(absl::InternalError("injected"));
  RequestStream stream;
  GenerateRequest request = GreedyRequest(MakePrompt(6, 3), 3);
  request.on_event = stream.Callback();
  ASSERT_TRUE(engine->Submit(std::move(request)).ok());
  EXPECT_FALSE(engine->RunUntilIdle().ok());
  ASSERT_EQ(recorder.steps.size(), 1u);
  EXPECT_FALSE(recorder.steps[0].ok);
  EXPECT_EQ(recorder.steps[0].num_prefill_tokens, 6);
  EXPECT_EQ(engine->Stats().num_steps, 1);
}

TEST(StepObserverTest, ObserverMayReadStats) {
  FakeBackend backend(kVocab, 32, 4);
  std::vector<int32_t> running;
  EngineOptions options;
  Engine* raw = nullptr;
  options.on_step = [&](const EngineStepStats&) { running.push_back(raw->Stats().num_running); };
  auto engine = Engine::Create(&backend, options);
  ASSERT_TRUE(engine.ok());
  raw = engine->get();
  (*engine)->Start();
  RequestStream stream;
  GenerateRequest request = GreedyRequest(MakePrompt(6, 3), 3);
  request.on_event = stream.Callback();
  ASSERT_TRUE((*engine)->Submit(std::move(request)).ok());
  ASSERT_TRUE(stream.WaitWithTimeout(absl::Seconds(10)).has_value());
  (*engine)->Stop();
  // Stats are published before the report: the last step finished the request.
  ASSERT_EQ(running.size(), 3u);
  EXPECT_EQ(running.front(), 1);
  EXPECT_EQ(running.back(), 0);
}

TEST(StepObserverTest, ImportedRequestsQueueTimeIsTheWaitForBlocks) {
  ManualClock clock;
  // 16 blocks of 4 tokens, 1 ms per step.
  TimedBackend backend(&clock, absl::Milliseconds(1), 16, 4);
  Recorder recorder;
  auto engine = MakeObservedEngine(&backend, &recorder, &clock, /*max_num_batched_tokens=*/64);

  // A local request holds 10 blocks (40 prompt tokens) for 5 steps; a reservation for 7 blocks
  // arrives after its first step and waits until it finishes.
  RequestStream reserved_stream;
  auto reservation = std::make_shared<std::optional<absl::StatusOr<KvReservation>>>();
  RequestStream local_stream;
  GenerateRequest local = GreedyRequest(MakePrompt(40, 1), 5);
  local.params.ignore_eos = true;
  bool reserved = false;
  local.on_event = [&](const GenerationEvent& e) {
    local_stream.Push(e);
    if (reserved) return;
    reserved = true;
    GenerateRequest r = GreedyRequest(MakePrompt(28, 2), 3);
    r.on_event = reserved_stream.Callback();
    auto id = engine->Reserve(
        std::move(r), absl::Seconds(30),
        [reservation](absl::StatusOr<KvReservation> res) { *reservation = std::move(res); });
    EXPECT_TRUE(id.ok()) << id.status();
  };
  ASSERT_TRUE(engine->Submit(std::move(local)).ok());
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  ASSERT_TRUE(local_stream.finished());
  ASSERT_TRUE(reservation->has_value());
  ASSERT_TRUE((*reservation)->ok()) << (*reservation)->status();

  // The reservation arrived at 1 ms (after step 1) and got blocks at 5 ms (after step 5). Its KV
  // goes into the reserved blocks as a writer would put it there; then the completion.
  const std::vector<TokenId> prompt = MakePrompt(28, 2);
  ForwardItem item;
  item.tokens = prompt;
  item.block_table = (*reservation)->value().block_ids;
  const std::vector<ForwardItem> items = {item};
  ASSERT_TRUE(backend.FakeBackend::Forward(ForwardBatch{items}, LogitsOutput{}).ok());
  engine->CompleteImport(
      ImportedPrefill{.request_id = (**reservation)->request_id, .first_token = 3});
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  std::optional<GenerationEvent> first = reserved_stream.NextWithTimeout(absl::Seconds(1));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->token, 3);
  EXPECT_EQ(first->queue_nanos, 4'000'000);
  // The imported request's steps are decodes only.
  const size_t local_steps = 5;
  ASSERT_EQ(recorder.steps.size(), local_steps + 2);
  for (size_t i = local_steps; i < recorder.steps.size(); ++i) {
    EXPECT_EQ(recorder.steps[i].num_prefill_seqs, 0) << i;
    EXPECT_EQ(recorder.steps[i].num_decode_seqs, 1) << i;
  }
}

}  // namespace
}  // namespace tandem
