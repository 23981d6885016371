// Live KV migration, the engine's side (engine.h: PauseForMigration, ResumePaused, ExportPaused,
// and Reserve with resumed output): a request paused after k tokens on one engine, its KV copied
// block by block into a reservation on another engine, continues there with exactly the tokens
// and rng counters of an uninterrupted run (greedy and seeded sampling); the fake backend checks
// that every position it reads holds the KV of that position, so KV that did not arrive fails the
// run. Resume, cancel during an export, refusals and block accounting too.
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/engine/engine.h"
#include "common/engine/kv_exporter.h"
#include "common/engine/request_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

constexpr int kBlockSize = 4;
constexpr int kMaxTokens = 16;

GenerateRequest SeededRequest(std::vector<TokenId> prompt, int max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0.8f;
  r.params.top_p = 0.95f;
  r.params.repetition_penalty = 1.2f;
  r.params.seed = 77;
  r.params.max_tokens = max_tokens;
  return r;
}

// Copies the exported blocks into the destination's reservation and completes its import, as the
// KV transport and the destination's verifier do between two nodes.
class MovingExporter : public KvExporter {
 public:
  MovingExporter(FakeBackend* src, FakeBackend* dst, Engine* destination, KvReservation target)
      : src_(src), dst_(dst), destination_(destination), target_(std::move(target)) {}

  void OnBlocksReady(RequestId, int32_t first_index, std::span<const int32_t> blocks) override {
    EXPECT_EQ(first_index, 0);
    blocks_.assign(blocks.begin(), blocks.end());
  }
  void OnPrefillDone(const GenerationEvent& last, uint64_t rng_counter) override {
    ASSERT_EQ(blocks_.size(), target_.block_ids.size());
    const size_t skip = target_.num_cached_tokens / kBlockSize;
    for (size_t i = skip; i < blocks_.size(); ++i) {
      dst_->CopyBlockFrom(*src_, blocks_[i], target_.block_ids[i]);
    }
    last_token = last.token;
    destination_->CompleteImport(ImportedPrefill{.request_id = target_.request_id,
                                                 .first_token = last.token + token_offset,
                                                 .rng_counter = rng_counter});
  }
  void OnAborted(RequestId, const absl::Status& status) override { aborted = status; }

  TokenId last_token = -1;
  int token_offset = 0;  // != 0: a completion naming the wrong last token
  std::optional<absl::Status> aborted;

 private:
  FakeBackend* src_;
  FakeBackend* dst_;
  Engine* destination_;
  KvReservation target_;
  std::vector<int32_t> blocks_;
};

// A source engine running one request that pauses itself after `pause_after` tokens.
struct PausedSource {
  FakeBackend backend{kVocab, 48, kBlockSize};
  std::unique_ptr<Engine> engine = MakeEngine(&backend, /*max_num_batched_tokens=*/64);
  RequestId id = 0;
  std::vector<TokenId> tokens;
  std::vector<uint64_t> counters;
  bool paused = false;

  void Start(GenerateRequest request, int pause_after) {
    request.on_event = [this, pause_after](const GenerationEvent& e) {
      if (e.paused) paused = true;
      if (!e.has_token()) return;
      tokens.push_back(e.token);
      counters.push_back(e.rng_counter);
      if (static_cast<int>(tokens.size()) == pause_after) engine->PauseForMigration(e.request_id);
    };
    auto submitted = engine->Submit(std::move(request));
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    id = *submitted;
    ASSERT_TRUE(engine->RunUntilIdle().ok());
  }
};

absl::StatusOr<KvReservation> Reserve(Engine& engine, GenerateRequest request,
                                      RequestStream* stream) {
  auto result = std::make_shared<std::optional<absl::StatusOr<KvReservation>>>();
  request.on_event = stream->Callback();
  auto id = engine.Reserve(std::move(request), absl::Seconds(30),
                           [result](absl::StatusOr<KvReservation> r) { *result = std::move(r); });
  if (!id.ok()) return id.status();
  EXPECT_TRUE(engine.RunUntilIdle().ok());
  if (!result->has_value()) return absl::UnavailableError("no reservation yet");
  return **result;
}

void ExpectMovesExactly(const GenerateRequest& request) {
  FakeBackend reference_backend(kVocab, 48, kBlockSize);
  auto reference = MakeEngine(&reference_backend);
  const GenerationResult full = RunOne(*reference, request);
  ASSERT_TRUE(full.status.ok()) << full.status;
  ASSERT_EQ(full.tokens.size(), static_cast<size_t>(kMaxTokens));
  for (int k : {1, 5, kMaxTokens - 1}) {
    SCOPED_TRACE(::testing::Message() << "moved after " << k << " tokens");
    PausedSource source;
    source.Start(request, k);
    ASSERT_TRUE(source.paused);
    ASSERT_EQ(source.tokens, std::vector<TokenId>(full.tokens.begin(), full.tokens.begin() + k));
    EXPECT_EQ(source.engine->Stats().num_paused, 1);
    EXPECT_EQ(source.engine->Stats().num_running, 0);

    FakeBackend dst_backend(kVocab, 48, kBlockSize);
    RequestStream dst_stream;  // outlives the destination, whose destructor may end the request
    auto destination = MakeEngine(&dst_backend);
    GenerateRequest moved = request;
    moved.resumed_output_token_ids = source.tokens;
    moved.resumed_rng_counter = source.counters.back();
    auto reservation = Reserve(*destination, moved, &dst_stream);
    ASSERT_TRUE(reservation.ok()) << reservation.status();
    // Blocks for the KV of every token but the last.
    const int kv_tokens = static_cast<int>(request.prompt.size()) + k - 1;
    EXPECT_EQ(reservation->block_ids.size(), static_cast<size_t>((kv_tokens + 3) / kBlockSize));

    auto exporter = std::make_shared<MovingExporter>(&source.backend, &dst_backend,
                                                     destination.get(), *reservation);
    source.engine->ExportPaused(source.id, exporter);
    ASSERT_TRUE(source.engine->RunUntilIdle().ok());
    EXPECT_FALSE(exporter->aborted.has_value());
    EXPECT_EQ(exporter->last_token, source.tokens.back());
    ASSERT_TRUE(destination->RunUntilIdle().ok());
    const GenerationResult rest = dst_stream.Wait();
    ASSERT_TRUE(rest.status.ok()) << rest.status;
    EXPECT_EQ(rest.tokens, std::vector<TokenId>(full.tokens.begin() + k, full.tokens.end()));
    EXPECT_EQ(rest.rng_counters,
              std::vector<uint64_t>(full.rng_counters.begin() + k, full.rng_counters.end()));
    EXPECT_EQ(rest.finish_reason, full.finish_reason);
    EXPECT_EQ(rest.usage.completion_tokens, kMaxTokens);

    // The source keeps the blocks until the exporter lets go and the request is cancelled.
    const int32_t all = source.engine->Stats().num_kv_blocks;
    EXPECT_LT(source.engine->Stats().num_free_kv_blocks, all);
    source.engine->ReleaseExportedBlocks(source.id);
    source.engine->Cancel(source.id);
    ASSERT_TRUE(source.engine->RunUntilIdle().ok());
    EXPECT_EQ(source.engine->Stats().num_paused, 0);
    EXPECT_EQ(source.engine->Stats().num_free_kv_blocks, all);
    EXPECT_EQ(destination->Stats().num_free_kv_blocks, destination->Stats().num_kv_blocks);
  }
}

TEST(EngineMigrationTest, GreedyRequestMovesWithItsKvExactly) {
  ExpectMovesExactly(GreedyRequest(MakePrompt(10, 1), kMaxTokens));
}

TEST(EngineMigrationTest, SeededSampledRequestMovesWithItsKvExactly) {
  ExpectMovesExactly(SeededRequest(MakePrompt(9, 2), kMaxTokens));
}

TEST(EngineMigrationTest, ResumedRequestContinuesAsIfNeverPaused) {
  const GenerateRequest request = SeededRequest(MakePrompt(7, 3), kMaxTokens);
  FakeBackend reference_backend(kVocab, 48, kBlockSize);
  auto reference = MakeEngine(&reference_backend);
  const GenerationResult full = RunOne(*reference, request);
  PausedSource source;
  source.Start(request, 6);
  ASSERT_TRUE(source.paused);
  source.engine->ResumePaused(source.id);
  ASSERT_TRUE(source.engine->RunUntilIdle().ok());
  EXPECT_EQ(source.tokens, full.tokens);
  EXPECT_EQ(source.counters, full.rng_counters);
  EXPECT_EQ(source.engine->Stats().num_paused, 0);
  EXPECT_EQ(source.engine->Stats().num_free_kv_blocks, source.engine->Stats().num_kv_blocks);
}

TEST(EngineMigrationTest, ExportOfARequestNotPausedIsRefused) {
  FakeBackend backend(kVocab, 48, kBlockSize);
  auto engine = MakeEngine(&backend);
  auto exporter =
      std::make_shared<MovingExporter>(&backend, &backend, engine.get(), KvReservation{});
  engine->ExportPaused(12345, exporter);
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  ASSERT_TRUE(exporter->aborted.has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(*exporter->aborted)) << *exporter->aborted;
  EXPECT_THAT(exporter->aborted->message(), HasSubstr("not paused"));
}

TEST(EngineMigrationTest, CancelDuringAnExportHoldsTheBlocksUntilReleased) {
  PausedSource source;
  source.Start(GreedyRequest(MakePrompt(10, 4), kMaxTokens), 3);
  ASSERT_TRUE(source.paused);
  // An exporter that reads and never completes (its writes still in flight).
  class SlowExporter : public KvExporter {
   public:
    void OnBlocksReady(RequestId, int32_t, std::span<const int32_t> b) override {
      blocks = static_cast<int>(b.size());
    }
    void OnPrefillDone(const GenerationEvent&, uint64_t) override { done = true; }
    void OnAborted(RequestId, const absl::Status&) override { aborted = true; }
    int blocks = 0;
    bool done = false;
    bool aborted = false;
  };
  auto exporter = std::make_shared<SlowExporter>();
  source.engine->ExportPaused(source.id, exporter);
  ASSERT_TRUE(source.engine->RunUntilIdle().ok());
  EXPECT_EQ(exporter->blocks, (10 + 3 - 1 + 3) / kBlockSize);
  EXPECT_TRUE(exporter->done);
  // A second export while the first reads is refused.
  auto second = std::make_shared<SlowExporter>();
  source.engine->ExportPaused(source.id, second);
  source.engine->Cancel(source.id);
  ASSERT_TRUE(source.engine->RunUntilIdle().ok());
  EXPECT_TRUE(second->aborted);
  EXPECT_FALSE(exporter->aborted);  // the engine was done with it already
  const EngineStats held = source.engine->Stats();
  EXPECT_EQ(held.num_paused, 0);
  EXPECT_EQ(held.num_export_held_blocks, exporter->blocks);
  source.engine->ReleaseExportedBlocks(source.id);
  ASSERT_TRUE(source.engine->RunUntilIdle().ok());
  EXPECT_EQ(source.engine->Stats().num_free_kv_blocks, source.engine->Stats().num_kv_blocks);
  EXPECT_EQ(source.engine->Stats().num_export_held_blocks, 0);
}

TEST(EngineMigrationTest, ResumeDuringAnExportWaitsForTheRelease) {
  const GenerateRequest request = GreedyRequest(MakePrompt(8, 5), kMaxTokens);
  PausedSource source;
  source.Start(request, 4);
  ASSERT_TRUE(source.paused);
  FakeBackend dst_backend(kVocab, 48, kBlockSize);
  RequestStream dst_stream;  // outlives the destination, whose destructor may end the request
  auto destination = MakeEngine(&dst_backend);
  GenerateRequest moved = request;
  moved.resumed_output_token_ids = source.tokens;
  auto reservation = Reserve(*destination, moved, &dst_stream);
  ASSERT_TRUE(reservation.ok()) << reservation.status();
  auto exporter = std::make_shared<MovingExporter>(&source.backend, &dst_backend, destination.get(),
                                                   *reservation);
  source.engine->ExportPaused(source.id, exporter);
  source.engine->ResumePaused(source.id);
  ASSERT_TRUE(source.engine->RunUntilIdle().ok());
  EXPECT_EQ(source.engine->Stats().num_paused, 1);  // still read by the exporter
  source.engine->ReleaseExportedBlocks(source.id);
  ASSERT_TRUE(source.engine->RunUntilIdle().ok());
  EXPECT_EQ(source.engine->Stats().num_paused, 0);
  EXPECT_EQ(source.tokens, FakeBackend::ReferenceGreedy(request.prompt, kVocab, kMaxTokens));
}

TEST(EngineMigrationTest, CompletionNamingAnotherLastTokenFailsTheImport) {
  const GenerateRequest request = GreedyRequest(MakePrompt(8, 6), kMaxTokens);
  PausedSource source;
  source.Start(request, 4);
  FakeBackend dst_backend(kVocab, 48, kBlockSize);
  RequestStream dst_stream;  // outlives the destination, whose destructor may end the request
  auto destination = MakeEngine(&dst_backend);
  GenerateRequest moved = request;
  moved.resumed_output_token_ids = source.tokens;
  auto reservation = Reserve(*destination, moved, &dst_stream);
  ASSERT_TRUE(reservation.ok()) << reservation.status();
  auto exporter = std::make_shared<MovingExporter>(&source.backend, &dst_backend, destination.get(),
                                                   *reservation);
  exporter->token_offset = 1;
  source.engine->ExportPaused(source.id, exporter);
  ASSERT_TRUE(source.engine->RunUntilIdle().ok());
  ASSERT_TRUE(destination->RunUntilIdle().ok());
  const GenerationResult result = dst_stream.Wait();
  EXPECT_TRUE(absl::IsDataLoss(result.status)) << result.status;
  EXPECT_TRUE(result.tokens.empty());
  EXPECT_EQ(destination->Stats().num_free_kv_blocks, destination->Stats().num_kv_blocks);
}

TEST(EngineMigrationTest, ReservationWhoseResumedOutputAlreadyEndsIsRefused) {
  FakeBackend backend(kVocab, 48, kBlockSize);
  auto engine = MakeEngine(&backend);
  GenerateRequest request = GreedyRequest(MakePrompt(8, 7), 3);
  request.resumed_output_token_ids = {1, 2, 3};
  auto id = engine->Reserve(std::move(request), absl::Seconds(30), [](auto) {});
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr("already end the request"));
}

TEST(EngineMigrationTest, PauseAskedDuringPrefillWaitsForTheFirstToken) {
  FakeBackend backend(kVocab, 48, kBlockSize);
  // A prompt of 30 tokens in chunks of 8: four steps before its first token.
  auto engine = MakeEngine(&backend, /*max_num_batched_tokens=*/8, /*max_num_seqs=*/4);
  std::vector<GenerationEvent> events;
  GenerateRequest request = GreedyRequest(MakePrompt(30, 8), kMaxTokens);
  request.on_event = [&events](const GenerationEvent& e) { events.push_back(e); };
  auto id = engine->Submit(std::move(request));
  ASSERT_TRUE(id.ok());
  engine->PauseForMigration(*id);
  ASSERT_TRUE(engine->RunUntilIdle().ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_TRUE(events[0].has_token());
  EXPECT_TRUE(events[1].paused);
  EXPECT_FALSE(events[1].finished);
  EXPECT_EQ(events[1].usage.completion_tokens, 1);
  EXPECT_EQ(engine->Stats().num_paused, 1);
  engine->Stop();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_TRUE(events[2].finished);
  EXPECT_EQ(engine->Stats().num_free_kv_blocks, engine->Stats().num_kv_blocks);
}

}  // namespace
}  // namespace tandem
