// The engine's halves of a prefill/decode handoff, joined in one process by a test exporter that
// copies blocks between two fake backends: reservations, leases, quarantine, export and release.
#include <time.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/engine/engine.h"
#include "common/engine/kv_exporter.h"
#include "common/engine/request_stream.h"
#include "common/util/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

// Records what the prefill engine hands out; on OnPrefillDone copies the blocks into the decode
// node's reservation (skipping the ones it already holds) and completes the import.
class CopyingExporter : public KvExporter {
 public:
  CopyingExporter(FakeBackend* src, FakeBackend* dst, Engine* decode, KvReservation reservation)
      : src_(src), dst_(dst), decode_(decode), reservation_(std::move(reservation)) {}

  void OnBlocksReady(RequestId id, int32_t first_index, std::span<const int32_t> blocks) override {
    EXPECT_EQ(first_index, static_cast<int32_t>(local_blocks_.size()));
    local_blocks_.insert(local_blocks_.end(), blocks.begin(), blocks.end());
    id_ = id;
    if (on_blocks_) on_blocks_(id);
  }
  void OnPrefillDone(const GenerationEvent& first, uint64_t rng_counter) override {
    const int32_t skip = reservation_.num_cached_tokens / dst_->kv_layout().block_size;
    ASSERT_EQ(local_blocks_.size(), reservation_.block_ids.size());
    for (size_t i = skip; i < local_blocks_.size(); ++i) {
      dst_->CopyBlockFrom(*src_, local_blocks_[i], reservation_.block_ids[i]);
      ++copied_;
    }
    done_ = true;
    first_token_ = first.token;
    decode_->CompleteImport(ImportedPrefill{.request_id = reservation_.request_id,
                                            .first_token = first.token,
                                            .logprob = first.logprob,
                                            .top_logprobs = first.top_logprobs,
                                            .rng_counter = rng_counter});
  }
  void OnAborted(RequestId id, const absl::Status& status) override {
    aborted_ = status;
    id_ = id;
  }

  std::function<void(RequestId)> on_blocks_;
  RequestId id_ = 0;
  std::vector<int32_t> local_blocks_;
  int copied_ = 0;
  bool done_ = false;
  TokenId first_token_ = -1;
  std::optional<absl::Status> aborted_;

 private:
  FakeBackend* src_;
  FakeBackend* dst_;
  Engine* decode_;
  KvReservation reservation_;
};

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Reserves and runs the engine once. The callback may fire later (a reservation that waits for
// blocks), so its result lives on the heap, not on this frame.
absl::StatusOr<KvReservation> ReserveNow(Engine& decode, GenerateRequest request,
                                         RequestStream* stream,
                                         absl::Duration lease = absl::Seconds(30)) {
  auto result = std::make_shared<std::optional<absl::StatusOr<KvReservation>>>();
  request.on_event = stream->Callback();
  auto id = decode.Reserve(std::move(request), lease,
                           [result](absl::StatusOr<KvReservation> r) { *result = std::move(r); });
  if (!id.ok()) return id.status();
  EXPECT_TRUE(decode.RunUntilIdle().ok());
  if (!result->has_value()) return absl::UnavailableError("no reservation yet");
  return **result;
}

struct Cluster {
  FakeBackend prefill_backend{kVocab, 64, 4};
  FakeBackend decode_backend{kVocab, 48, 4};
  std::unique_ptr<Engine> prefill =
      MakeEngine(&prefill_backend, /*max_num_batched_tokens=*/8, /*max_num_seqs=*/4);
  std::unique_ptr<Engine> decode = MakeEngine(&decode_backend);

  // Runs one request through both engines; returns the decode node's result.
  GenerationResult Run(GenerateRequest request, CopyingExporter** exporter_out = nullptr) {
    RequestStream decode_stream;
    auto reservation = ReserveNow(*decode, request, &decode_stream);
    EXPECT_TRUE(reservation.ok()) << reservation.status();
    auto exporter = std::make_shared<CopyingExporter>(&prefill_backend, &decode_backend,
                                                      decode.get(), *reservation);
    RequestStream prefill_stream;
    GenerateRequest p = request;
    p.kv_exporter = exporter;
    p.on_event = prefill_stream.Callback();
    auto pid = prefill->Submit(std::move(p));
    EXPECT_TRUE(pid.ok()) << pid.status();
    EXPECT_TRUE(prefill->RunUntilIdle().ok());
    GenerationResult first = prefill_stream.Wait();
    EXPECT_EQ(first.finish_reason, FinishReason::kPrefillDone);
    EXPECT_EQ(first.tokens.size(), 1u);
    EXPECT_TRUE(exporter->done_);
    EXPECT_GT(prefill->Stats().num_export_held_blocks, 0);
    prefill->ReleaseExportedBlocks(*pid);
    EXPECT_TRUE(prefill->RunUntilIdle().ok());
    EXPECT_EQ(prefill->Stats().num_export_held_blocks, 0);
    EXPECT_TRUE(decode->RunUntilIdle().ok());
    if (exporter_out != nullptr) *exporter_out = exporter.get();
    last_exporter_ = exporter;
    return decode_stream.Wait();
  }
  std::shared_ptr<CopyingExporter> last_exporter_;
};

TEST(DisaggregationTest, GreedyOutputMatchesTheReferenceAcrossPromptLengths) {
  Cluster c;
  for (int len : {1, 3, 4, 5, 8, 13, 21}) {
    std::vector<TokenId> prompt = MakePrompt(len, len);
    GenerationResult r = c.Run(GreedyRequest(prompt, 12));
    EXPECT_EQ(r.tokens, FakeBackend::ReferenceGreedy(prompt, kVocab, 12)) << "len " << len;
    EXPECT_EQ(r.finish_reason, FinishReason::kLength);
    EXPECT_EQ(r.usage.completion_tokens, 12);
  }
  EXPECT_EQ(c.decode->Stats().num_free_kv_blocks, 48);
  EXPECT_EQ(c.decode->Stats().num_awaiting_kv, 0);
  EXPECT_EQ(c.decode->Stats().num_imported_requests, 7);
  EXPECT_EQ(c.prefill->Stats().num_free_kv_blocks, 64);
}

TEST(DisaggregationTest, SeededSamplingContinuesTheRandomStream) {
  Cluster c;
  std::vector<TokenId> prompt = MakePrompt(11, 5);
  GenerateRequest request = GreedyRequest(prompt, 16);
  request.params.temperature = 1.0f;
  request.params.seed = 1234;
  GenerationResult disaggregated = c.Run(request);
  FakeBackend colocated_backend(kVocab, 64, 4);
  auto colocated = MakeEngine(&colocated_backend);
  GenerationResult reference = RunOne(*colocated, request);
  EXPECT_EQ(disaggregated.tokens, reference.tokens);
  // The decode node's events carry the counter a migrated request resumes from (request.h).
  EXPECT_EQ(disaggregated.rng_counters, reference.rng_counters);
  GenerateRequest migrated = request;
  migrated.resumed_output_token_ids.assign(disaggregated.tokens.begin(),
                                           disaggregated.tokens.begin() + 5);
  migrated.resumed_rng_counter = disaggregated.rng_counters[4];
  EXPECT_EQ(RunOne(*colocated, migrated).tokens,
            std::vector<TokenId>(reference.tokens.begin() + 5, reference.tokens.end()));
}

TEST(DisaggregationTest, DecodeNodePrefixIsNotResent) {
  Cluster c;
  std::vector<TokenId> prompt = MakePrompt(17, 9);
  c.Run(GreedyRequest(prompt, 3));
  std::vector<TokenId> longer = prompt;
  longer.insert(longer.end(), {1, 2, 3, 4, 5});
  CopyingExporter* exporter = nullptr;
  GenerationResult r = c.Run(GreedyRequest(longer, 6), &exporter);
  EXPECT_EQ(r.tokens, FakeBackend::ReferenceGreedy(longer, kVocab, 6));
  EXPECT_EQ(r.usage.cached_tokens, 16);  // four full blocks of the first prompt
  EXPECT_EQ(exporter->copied_, 2);       // 22 tokens = 6 blocks, 4 already there
}

TEST(DisaggregationTest, FirstTokenThatStopsEndsTheRequestAtImport) {
  Cluster c;
  std::vector<TokenId> prompt = MakePrompt(6, 2);
  GenerateRequest request = GreedyRequest(prompt, 10);
  request.params.stop_token_ids = {FakeBackend::ReferenceGreedy(prompt, kVocab, 1)[0]};
  GenerationResult r = c.Run(request);
  EXPECT_EQ(r.tokens.size(), 1u);
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
  EXPECT_EQ(c.decode->Stats().num_free_kv_blocks, 48);
}

TEST(DisaggregationTest, ExpiredLeaseFailsTheRequestAndQuarantinesItsBlocks) {
  FakeBackend backend(kVocab, 16, 4);
  ManualClock clock;
  EngineOptions options;
  options.kv_write_grace = absl::Seconds(2);
  auto engine = Engine::Create(&backend, options, &clock);
  ASSERT_TRUE(engine.ok());
  RequestStream stream;
  auto reservation =
      ReserveNow(**engine, GreedyRequest(MakePrompt(9, 1), 4), &stream, absl::Seconds(5));
  ASSERT_TRUE(reservation.ok()) << reservation.status();
  EXPECT_EQ(reservation->block_ids.size(), 3u);
  EXPECT_EQ((*engine)->Stats().num_awaiting_kv, 1);
  EXPECT_EQ((*engine)->Stats().num_free_kv_blocks, 13);

  clock.AdvanceSeconds(4);
  ASSERT_TRUE((*engine)->RunUntilIdle().ok());
  EXPECT_FALSE(stream.finished());
  clock.AdvanceSeconds(2);
  ASSERT_TRUE((*engine)->RunUntilIdle().ok());
  ASSERT_TRUE(stream.finished());
  GenerationResult r = stream.Wait();
  EXPECT_EQ(r.finish_reason, FinishReason::kError);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status.message(), HasSubstr("lease"));
  EXPECT_EQ((*engine)->Stats().num_expired_leases, 1);
  // A write that started before the deadline may still land: blocks stay out of use for the grace.
  EXPECT_EQ((*engine)->Stats().num_quarantined_blocks, 3);
  EXPECT_EQ((*engine)->Stats().num_free_kv_blocks, 13);
  clock.AdvanceSeconds(1);
  ASSERT_TRUE((*engine)->RunUntilIdle().ok());
  EXPECT_EQ((*engine)->Stats().num_quarantined_blocks, 3);
  clock.AdvanceSeconds(1);
  ASSERT_TRUE((*engine)->RunUntilIdle().ok());
  EXPECT_EQ((*engine)->Stats().num_quarantined_blocks, 0);
  EXPECT_EQ((*engine)->Stats().num_free_kv_blocks, 16);
}

TEST(DisaggregationTest, CancelWhileAwaitingKvQuarantinesUntilTheWriterStops) {
  FakeBackend backend(kVocab, 16, 4);
  auto engine = MakeEngine(&backend);
  RequestStream stream;
  auto reservation = ReserveNow(*engine, GreedyRequest(MakePrompt(8, 1), 4), &stream);
  ASSERT_TRUE(reservation.ok());
  engine->Cancel(reservation->request_id);
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  GenerationResult r = stream.Wait();
  EXPECT_EQ(r.finish_reason, FinishReason::kAborted);
  EXPECT_EQ(engine->Stats().num_quarantined_blocks, 2);
  engine->AbortImport(reservation->request_id, absl::CancelledError("writer stopped"));
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  EXPECT_EQ(engine->Stats().num_quarantined_blocks, 0);
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 16);
}

TEST(DisaggregationTest, LateCompletionAfterCancelFreesTheBlocks) {
  FakeBackend backend(kVocab, 16, 4);
  auto engine = MakeEngine(&backend);
  RequestStream stream;
  auto reservation = ReserveNow(*engine, GreedyRequest(MakePrompt(8, 1), 4), &stream);
  ASSERT_TRUE(reservation.ok());
  engine->Cancel(reservation->request_id);
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  engine->CompleteImport(ImportedPrefill{.request_id = reservation->request_id, .first_token = 3});
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  EXPECT_EQ(stream.Wait().tokens.size(), 0u);
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 16);
}

// A decode engine of 16 blocks of 4 tokens with one 8-token request reserved, awaiting its KV.
class DisaggregationOneReservationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto reservation = ReserveNow(*engine_, GreedyRequest(MakePrompt(8, 1), 4), &stream_);
    ASSERT_TRUE(reservation.ok()) << reservation.status();
    id_ = reservation->request_id;
  }

  FakeBackend backend_{kVocab, 16, 4};
  std::unique_ptr<Engine> engine_ = MakeEngine(&backend_);
  RequestStream stream_;
  RequestId id_ = 0;
};

// The inbox applies commands in arrival order: a cancel that arrives before the completion ends
// the request without its first token (its blocks quarantined), and the completion that follows
// in the same turn frees them; a completion that arrives first delivers the token, then the cancel
// ends the running request.
TEST_F(DisaggregationOneReservationTest, CancelAndCompletionInOneTurnApplyInArrivalOrder) {
  RequestStream completed_first;
  auto other = ReserveNow(*engine_, GreedyRequest(MakePrompt(8, 2), 4), &completed_first);
  ASSERT_TRUE(other.ok());
  engine_->Cancel(id_);
  engine_->CompleteImport(ImportedPrefill{.request_id = id_, .first_token = 3});
  engine_->CompleteImport(ImportedPrefill{.request_id = other->request_id, .first_token = 3});
  engine_->Cancel(other->request_id);
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  GenerationResult cancelled = stream_.Wait();
  EXPECT_EQ(cancelled.finish_reason, FinishReason::kAborted);
  EXPECT_EQ(cancelled.tokens.size(), 0u);
  GenerationResult completed = completed_first.Wait();
  EXPECT_EQ(completed.finish_reason, FinishReason::kAborted);
  EXPECT_EQ(completed.tokens, std::vector<TokenId>{3});
  EXPECT_EQ(engine_->Stats().num_quarantined_blocks, 0);
  EXPECT_EQ(engine_->Stats().num_free_kv_blocks, 16);
  EXPECT_EQ(engine_->Stats().num_finished_requests, 2);
}

// Likewise a cancel that arrives before the writer's abort: the request ends as cancelled, and the
// abort frees the blocks the cancel quarantined.
TEST_F(DisaggregationOneReservationTest, CancelBeforeWriterAbortEndsAsCancelled) {
  engine_->Cancel(id_);
  engine_->AbortImport(id_, absl::UnavailableError("prefill node died"));
  ASSERT_TRUE(engine_->RunUntilIdle().ok());
  GenerationResult r = stream_.Wait();
  EXPECT_EQ(r.finish_reason, FinishReason::kAborted);
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(engine_->Stats().num_quarantined_blocks, 0);
  EXPECT_EQ(engine_->Stats().num_free_kv_blocks, 16);
}

TEST(DisaggregationTest, WriterAbortFailsTheRequestAndFreesAtOnce) {
  FakeBackend backend(kVocab, 16, 4);
  auto engine = MakeEngine(&backend);
  RequestStream stream;
  auto reservation = ReserveNow(*engine, GreedyRequest(MakePrompt(8, 1), 4), &stream);
  ASSERT_TRUE(reservation.ok());
  engine->AbortImport(reservation->request_id, absl::UnavailableError("prefill node died"));
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  GenerationResult r = stream.Wait();
  EXPECT_EQ(r.finish_reason, FinishReason::kError);
  EXPECT_THAT(r.status.message(), HasSubstr("prefill node died"));
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 16);
}

TEST(DisaggregationTest, ImportWithAFirstTokenOutsideTheVocabularyFails) {
  FakeBackend backend(kVocab, 16, 4);
  auto engine = MakeEngine(&backend);
  RequestStream stream;
  auto reservation = ReserveNow(*engine, GreedyRequest(MakePrompt(5, 1), 4), &stream);
  ASSERT_TRUE(reservation.ok());
  engine->CompleteImport(
      ImportedPrefill{.request_id = reservation->request_id, .first_token = kVocab + 5});
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  GenerationResult r = stream.Wait();
  EXPECT_EQ(r.finish_reason, FinishReason::kError);
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 16);
}

TEST(DisaggregationTest, ReservationsWaitForBlocksInOrderAndCanBeCancelled) {
  FakeBackend backend(kVocab, 4, 4);
  auto engine = MakeEngine(&backend);
  RequestStream first_stream;
  auto first = ReserveNow(*engine, GreedyRequest(MakePrompt(12, 1), 2), &first_stream);
  ASSERT_TRUE(first.ok());
  // 8 more tokens need 2 blocks; 1 is free.
  RequestStream second_stream;
  auto second = ReserveNow(*engine, GreedyRequest(MakePrompt(8, 2), 2), &second_stream);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);  // still waiting
  EXPECT_EQ(engine->Stats().num_pending_reservations, 1);
  RequestStream third_stream;
  std::optional<absl::StatusOr<KvReservation>> third;
  GenerateRequest third_request = GreedyRequest(MakePrompt(8, 3), 2);
  third_request.on_event = third_stream.Callback();
  auto third_id = engine->Reserve(std::move(third_request), absl::Seconds(30),
                                  [&](absl::StatusOr<KvReservation> r) { third = std::move(r); });
  ASSERT_TRUE(third_id.ok());
  engine->Cancel(*third_id);
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(third_stream.Wait().finish_reason, FinishReason::kAborted);

  engine->AbortImport(first->request_id, absl::CancelledError("gone"));
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  EXPECT_EQ(engine->Stats().num_pending_reservations, 0);
  EXPECT_EQ(engine->Stats().num_awaiting_kv, 1);  // the second one got the freed blocks
  engine->Stop();  // ends the second request while its stream still exists
  EXPECT_TRUE(second_stream.finished());
}

// A decode node of 16 blocks, 12 of them reserved for a prompt whose KV has not arrived, and
// a second prompt of 20 tokens (6 blocks with its output) that the 4 free ones do not hold.
struct HeldBlocks {
  HeldBlocks() {
    auto r = ReserveNow(*engine, GreedyRequest(MakePrompt(48, 1), 2), &reserved_stream);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) reservation = *r;
    EXPECT_EQ(engine->Stats().num_free_kv_blocks, 4);
  }
  // Submits the second prompt, prefilled for another node when `exporter` is set.
  void SubmitSecond(std::shared_ptr<KvExporter> exporter = nullptr) {
    GenerateRequest second = GreedyRequest(MakePrompt(20, 2), 4);
    second.kv_exporter = std::move(exporter);
    second.on_event = second_stream.Callback();
    EXPECT_TRUE(engine->Submit(std::move(second)).ok());
  }
  void AbortTheReservation() {
    engine->AbortImport(reservation.request_id, absl::UnavailableError("prefill node died"));
  }

  FakeBackend backend{kVocab, 16, 4};
  std::unique_ptr<Engine> engine = MakeEngine(&backend);
  RequestStream reserved_stream;
  KvReservation reservation;
  RequestStream second_stream;
};

// A local prompt (a decode node's own prefill, or colocated Generate) that needs blocks a
// reservation holds while its KV arrives waits for them: it is not failed as one the pool can
// never hold.
TEST(DisaggregationTest, ALocalPromptWaitsForTheBlocksAReservationHolds) {
  HeldBlocks held;
  held.SubmitSecond();
  ASSERT_TRUE(held.engine->RunUntilIdle().ok());
  EXPECT_FALSE(held.second_stream.finished());
  EXPECT_EQ(held.engine->Stats().num_waiting, 1);

  // The writer gives up: the reservation's blocks come back, and the prompt runs.
  held.AbortTheReservation();
  ASSERT_TRUE(held.engine->RunUntilIdle().ok());
  EXPECT_EQ(held.reserved_stream.Wait().finish_reason, FinishReason::kError);
  GenerationResult r = held.second_stream.Wait();
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
  EXPECT_EQ(r.tokens.size(), 4u);
  EXPECT_EQ(held.engine->Stats().num_free_kv_blocks, 16);
}

// The same on the engine thread, which sleeps while the prompt waits (it steps again only when a
// command or timed work arrives) and runs it once the reservation's blocks are back.
TEST(DisaggregationTest, TheEngineThreadWaitsWithoutSteppingForHeldBlocks) {
  HeldBlocks held;
  held.engine->Start();
  held.SubmitSecond();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(held.second_stream.finished());
  // While this thread sleeps, the process's CPU time is the engine thread's: its 10 ms
  // housekeeping turns (the lease), not a spin (which takes all of a core it gets).
  const double cpu_before = ProcessCpuSeconds();
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_LT(ProcessCpuSeconds() - cpu_before, 0.04);
  EXPECT_FALSE(held.second_stream.finished());
  held.AbortTheReservation();
  EXPECT_EQ(held.reserved_stream.Wait().finish_reason, FinishReason::kError);
  GenerationResult r = held.second_stream.Wait();
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.tokens.size(), 4u);
  held.engine->Stop();
}

// A node that also prefills for others (auto mode) does not wait: its reservation's KV may come
// from a node whose own reservation waits for the prompt queued here. It fails the head, which
// the router retries elsewhere.
TEST(DisaggregationTest, ANodeThatAlsoPrefillsForOthersFailsTheHeadRatherThanWait) {
  HeldBlocks held;
  FakeBackend unused(kVocab, 16, 4);
  held.SubmitSecond(
      std::make_shared<CopyingExporter>(&held.backend, &unused, nullptr, KvReservation{}));
  EXPECT_EQ(held.engine->RunUntilIdle().code(), absl::StatusCode::kResourceExhausted);
  GenerationResult r = held.second_stream.Wait();
  EXPECT_EQ(r.finish_reason, FinishReason::kError);
  EXPECT_THAT(r.status.message(), HasSubstr("reserved for prompts other nodes prefill"));
  EXPECT_FALSE(held.reserved_stream.finished());
  held.engine->Stop();
}

TEST(DisaggregationTest, CancelledExportKeepsItsBlocksUntilReleased) {
  FakeBackend backend(kVocab, 16, 4);
  auto engine = MakeEngine(&backend, /*max_num_batched_tokens=*/4, /*max_num_seqs=*/2);
  FakeBackend unused(kVocab, 16, 4);
  auto exporter = std::make_shared<CopyingExporter>(&backend, &unused, nullptr, KvReservation{});
  RequestStream stream;
  GenerateRequest request = GreedyRequest(MakePrompt(20, 1), 4);
  request.kv_exporter = exporter;
  request.on_event = stream.Callback();
  // Cancel as soon as the first blocks were handed out (4 tokens per step: after one block).
  Engine* raw = engine.get();
  exporter->on_blocks_ = [raw](RequestId id) { raw->Cancel(id); };
  auto id = engine->Submit(std::move(request));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  GenerationResult r = stream.Wait();
  EXPECT_EQ(r.finish_reason, FinishReason::kAborted);
  ASSERT_TRUE(exporter->aborted_.has_value());
  EXPECT_EQ(exporter->id_, *id);
  EXPECT_EQ(exporter->local_blocks_.size(), 1u);
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 11);  // the prompt's 5 blocks, held
  EXPECT_EQ(engine->Stats().num_export_held_blocks, 5);
  engine->ReleaseExportedBlocks(*id);
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, 16);
  EXPECT_EQ(engine->Stats().num_export_held_blocks, 0);
}

}  // namespace
}  // namespace tandem
