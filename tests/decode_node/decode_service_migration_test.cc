// Live KV migration between real decode nodes over loopback gRPC and LocalTransport (issue 17 item
// 2), on the CPU backend's tiny Llama, whose tokens depend on the KV bytes that move: a request
// paused on one node (PauseForMigration: its stream says migration_paused) moves with its KV to a
// Reserve with its output so far on another (ExportKv), which streams exactly the rest of an
// uninterrupted run (greedy and seeded sampling); the source's blocks all come free once its
// stream is cancelled. ResumePaused puts a paused request back to decoding as if never paused,
// and a drain (PauseAllForMigration) pauses every request, the ones that start after it too.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/metrics/prometheus_text.h"
#include "common/serving/node_requests.h"
#include "gtest/gtest.h"
#include "tests/common/serving/metrics_scrape.h"
#include "tests/decode_node/decode_migration_nodes.h"

namespace tandem {
namespace {

using ::tandem::testing::GenerateOf;
using ::tandem::testing::MigrationNode;
using ::tandem::testing::MigrationPrompt;
using ::tandem::testing::MigrationStream;
using ::tandem::testing::PauseAfter;
using ::tandem::testing::ReserveFor;
using ::tandem::testing::RunUninterrupted;
using ::tandem::testing::Scrape;
using ::tandem::testing::ScrapeUntil;
using ::tandem::testing::Streamed;

constexpr int kMaxTokens = testing::kMigrationMaxTokens;

size_t PromptSize() { return MigrationPrompt().size(); }

template <typename T>
std::vector<T> Slice(const std::vector<T>& v, size_t from, size_t to) {
  return std::vector<T>(v.begin() + from, v.begin() + to);
}

TEST(DecodeServiceMigrationTest, MovesARunningRequestWithItsKvToAnotherNode) {
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "seeded sampling" : "greedy");
    MigrationNode source;
    MigrationNode destination;
    const Streamed full = RunUninterrupted(source, GenerateOf("reference", sampled));
    EXPECT_EQ(full.rng_counters.back(), sampled ? static_cast<uint64_t>(kMaxTokens) : 0u);

    // 1. The request runs on the source; after 5 tokens the router pauses it.
    source.backend->AllowSteps(5);
    MigrationStream moving(source, GenerateOf("mig", sampled));
    PauseAfter(source, moving, "mig", 5);
    const size_t k = moving.tokens.size();
    ASSERT_GE(k, 5u);
    EXPECT_EQ(moving.tokens, Slice(full.tokens, 0, k));
    EXPECT_EQ(source.AwaitStats([](const EngineStats& s) { return s.num_paused == 1; }).num_paused,
              1);
    EXPECT_EQ(Scrape(source.metrics).Value("tandem_decode_paused_requests"), 1);

    // 2. The destination reserves for it with its output so far: the KV of all but the last token.
    std::unique_ptr<MigrationStream> reserved = ReserveFor(destination, "mig", moving, sampled);
    MigrationStream& arriving = *reserved;
    ASSERT_TRUE(arriving.events[0].has_handoff());
    const v1::KvHandoff& handoff = arriving.events[0].handoff();
    const int kv_tokens = static_cast<int>(PromptSize() + k) - 1;
    EXPECT_EQ(handoff.block_ids_size(),
              (kv_tokens + testing::kMigrationBlockSize - 1) / testing::kMigrationBlockSize);

    // 3. The source writes the KV there and sends the completion.
    v1::ExportKvResponse exported;
    const grpc::Status status = source.ExportKv("mig", handoff, &exported);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(exported.num_blocks_written(), handoff.block_ids_size());
    EXPECT_EQ(exported.num_blocks_skipped(), 0);
    const KvLayout& layout = source.backend->kv_layout();
    EXPECT_EQ(exported.bytes_transferred(), int64_t{handoff.block_ids_size()} * 2 *
                                                layout.num_layers * layout.block_stride() *
                                                static_cast<int64_t>(DTypeSize(layout.dtype)));
    EXPECT_GT(exported.num_writes(), 0);
    EXPECT_GE(exported.transfer_us(), 0);

    // 4. The destination streams the rest, exactly as the uninterrupted run did.
    const grpc::Status arrived = arriving.Finish();
    ASSERT_TRUE(arrived.ok()) << arrived.error_message();
    EXPECT_EQ(arriving.tokens, Slice(full.tokens, k, kMaxTokens));
    EXPECT_EQ(arriving.rng_counters, Slice(full.rng_counters, k, kMaxTokens));
    EXPECT_EQ(arriving.finish_reason, "length");
    EXPECT_EQ(arriving.events.back().usage().completion_tokens(), kMaxTokens);
    EXPECT_EQ(arriving.pauses, 0);

    // 5. The router cancels the source's stream: nothing more streamed there, every block free.
    ASSERT_TRUE(source.Cancel("mig").ok());
    ASSERT_TRUE(moving.Finish().ok());
    EXPECT_EQ(moving.tokens.size(), k);
    EXPECT_EQ(moving.finish_reason, "abort");
    const EngineStats stats = source.AwaitStats([](const EngineStats& s) {
      return s.num_paused == 0 && s.num_free_kv_blocks == s.num_kv_blocks;
    });
    EXPECT_EQ(stats.num_paused, 0);
    EXPECT_EQ(stats.num_free_kv_blocks, stats.num_kv_blocks);
    EXPECT_EQ(stats.num_export_held_blocks, 0);

    // The metrics on both sides; the destination checked the block checksums before admitting.
    const PrometheusText out = Scrape(source.metrics);
    EXPECT_EQ(out.Value("tandem_decode_kv_exports_total", {{"result", "ok"}}), 1);
    EXPECT_EQ(out.Value("tandem_decode_kv_exports_total", {{"result", "failed"}}), 0);
    EXPECT_EQ(out.Value("tandem_decode_kv_export_bytes_total"), exported.bytes_transferred());
    EXPECT_EQ(out.Value("tandem_decode_paused_requests"), 0);
    const PrometheusText in = ScrapeUntil(destination.metrics, [](const PrometheusText& s) {
      return s.Value("tandem_decode_reservations_ended_total", {{"outcome", "imported"}}) == 1;
    });
    EXPECT_EQ(in.Value("tandem_decode_migrations_in_total"), 1);
    EXPECT_EQ(in.Value("tandem_decode_kv_imports_verified_total"), 1);
    EXPECT_EQ(in.Value("tandem_decode_imported_requests_total"), 1);
  }
}

TEST(DecodeServiceMigrationTest, ResumePausedGoesOnAsIfNeverPaused) {
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "seeded sampling" : "greedy");
    MigrationNode node;
    const Streamed full = RunUninterrupted(node, GenerateOf("reference", sampled));
    node.backend->AllowSteps(5);
    MigrationStream stream(node, GenerateOf("mig", sampled));
    PauseAfter(node, stream, "mig", 5);
    EXPECT_EQ(node.AwaitStats([](const EngineStats& s) { return s.num_paused == 1; }).num_paused,
              1);

    EXPECT_TRUE(node.Resume("mig").found());
    const grpc::Status status = stream.Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(stream.tokens, full.tokens);
    EXPECT_EQ(stream.rng_counters, full.rng_counters);
    EXPECT_EQ(stream.finish_reason, "length");
    EXPECT_EQ(stream.pauses, 1);
    const EngineStats stats = node.AwaitStats([](const EngineStats& s) {
      return s.num_running == 0 && s.num_free_kv_blocks == s.num_kv_blocks;
    });
    EXPECT_EQ(stats.num_paused, 0);
    EXPECT_EQ(stats.num_free_kv_blocks, stats.num_kv_blocks);
  }
}

TEST(DecodeServiceMigrationTest, UnknownIdsAreNotFound) {
  MigrationNode node;
  EXPECT_FALSE(node.Pause("nobody").found());
  EXPECT_FALSE(node.Resume("nobody").found());
}

TEST(DecodeServiceMigrationTest, DrainPausesEveryRequestAndThoseThatStartAfter) {
  MigrationNode node;
  const Streamed full_a = RunUninterrupted(node, GenerateOf("reference-a", false, 0));
  const Streamed full_b = RunUninterrupted(node, GenerateOf("reference-b", false, 1));
  // A stream under way, the engine held in its next step.
  node.backend->AllowSteps(1);
  MigrationStream a(node, GenerateOf("a", false, 0));
  ASSERT_TRUE(a.ReadTokens(1));
  EXPECT_EQ(node.service->PauseAllForMigration(), 1);
  node.backend->Open();
  ASSERT_TRUE(a.ReadUntilPaused());
  // One that starts during the drain pauses as soon as it has a token. (The engine is held after
  // its first step until it streamed one, so the pause asked as it started lands before its end.)
  node.backend->AllowSteps(1);
  MigrationStream b(node, GenerateOf("b", false, 1));
  ASSERT_TRUE(b.ReadTokens(1));
  node.backend->Open();
  ASSERT_TRUE(b.ReadUntilPaused());
  EXPECT_LE(b.tokens.size(), 2u);
  EXPECT_EQ(node.AwaitStats([](const EngineStats& s) { return s.num_paused == 2; }).num_paused, 2);
  EXPECT_EQ(Scrape(node.metrics).Value("tandem_decode_paused_requests"), 2);

  // No node has room: the router resumes them here, and each streams as if never paused.
  for (auto [stream, router_id, full] :
       {std::tuple(&a, "a", &full_a), std::tuple(&b, "b", &full_b)}) {
    SCOPED_TRACE(router_id);
    EXPECT_TRUE(node.Resume(router_id).found());
    const grpc::Status status = stream->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(stream->tokens, full->tokens);
    EXPECT_EQ(stream->pauses, 1);
  }
}

// The router-id table's side of it: a pause asked before the request has an engine id is
// remembered for Bind's caller (and a resume takes it back); a drain's PauseAll names the bound
// requests and every one bound after; untracked (empty) ids are never paused.
TEST(RouterRequestIdsMigrationTest, RemembersPausesForRequestsNotBoundYet) {
  using Intent = RouterRequestIds::PauseIntent;
  RouterRequestIds ids;
  EXPECT_FALSE(ids.ForMigration("nobody", Intent::kPause).found);
  ASSERT_TRUE(ids.Claim("early").ok());
  const RouterRequestIds::CancelTarget early = ids.ForMigration("early", Intent::kPause);
  EXPECT_TRUE(early.found);
  EXPECT_FALSE(early.id.has_value());
  EXPECT_TRUE(ids.Bind("early", 7));  // a pause is not a cancel
  EXPECT_TRUE(ids.PauseRequested("early"));

  ASSERT_TRUE(ids.Claim("taken-back").ok());
  ids.ForMigration("taken-back", Intent::kPause);
  ids.ForMigration("taken-back", Intent::kResume);
  ids.Bind("taken-back", 8);
  EXPECT_FALSE(ids.PauseRequested("taken-back"));
  const RouterRequestIds::CancelTarget bound = ids.ForMigration("taken-back", Intent::kNone);
  EXPECT_TRUE(bound.found);
  EXPECT_EQ(bound.id, RequestId{8});

  ASSERT_TRUE(ids.Claim("unbound").ok());
  std::vector<RequestId> paused = ids.PauseAll();
  std::sort(paused.begin(), paused.end());
  EXPECT_EQ(paused, (std::vector<RequestId>{7, 8}));
  ids.Bind("unbound", 9);
  EXPECT_TRUE(ids.PauseRequested("unbound"));
  EXPECT_FALSE(ids.PauseRequested(""));
  ids.Release("early");
  EXPECT_FALSE(ids.ForMigration("early", Intent::kNone).found);
}

}  // namespace
}  // namespace tandem
