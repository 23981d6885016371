// ExportKv's refusals and its guard of a running export, between real decode nodes over loopback
// gRPC and LocalTransport (issue 17 item 2): a forged or foreign handoff is PERMISSION_DENIED with
// nothing written and the destination untouched; an unknown router id is NOT_FOUND and a request
// that is not paused FAILED_PRECONDITION, each told to the destination, whose reservation ends at
// once; a second export while the first still reads the blocks is refused and leaves the first's
// hold on them, so the request stays paused until the first is done.
#include <string>
#include <thread>
#include <vector>

#include "common/metrics/prometheus_text.h"
#include "gtest/gtest.h"
#include "tests/common/serving/metrics_scrape.h"
#include "tests/decode_node/decode_migration_nodes.h"

namespace tandem {
namespace {

using ::tandem::testing::ClusterAuth;
using ::tandem::testing::GenerateOf;
using ::tandem::testing::kMigrationMaxTokens;
using ::tandem::testing::MigrationNode;
using ::tandem::testing::MigrationPrompt;
using ::tandem::testing::MigrationRequestOf;
using ::tandem::testing::MigrationStream;
using ::tandem::testing::PauseAfter;
using ::tandem::testing::ReserveFor;
using ::tandem::testing::RunUninterrupted;
using ::tandem::testing::ScrapeUntil;
using ::tandem::testing::Streamed;

std::vector<int32_t> BlocksOf(const v1::KvHandoff& handoff) {
  return std::vector<int32_t>(handoff.block_ids().begin(), handoff.block_ids().end());
}

// Waits (at most 10 s) until `n` operations are queued on `transport`.
bool AwaitPending(const LocalTransport& transport, int n) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (transport.pending() != n && absl::Now() < until) absl::SleepFor(absl::Milliseconds(2));
  return transport.pending() == n;
}

TEST(DecodeServiceExportKvTest, RefusesWhatItCannotMoveAndTellsTheDestination) {
  MigrationNode source;
  MigrationNode destination;
  source.backend->AllowSteps(4);
  MigrationStream moving(source, GenerateOf("mig", /*sampled=*/false));
  PauseAfter(source, moving, "mig", 4);
  std::unique_ptr<MigrationStream> arriving = ReserveFor(destination, "mig", moving, false);
  const v1::KvHandoff genuine = arriving->events[0].handoff();
  const std::vector<uint8_t> pool_before = destination.PoolBytes();
  v1::ExportKvResponse response;

  // 1. Forged handoffs: altered after signing (the writes would land where the caller chose),
  //    unsigned, signed with another cluster's secret. Nothing is written, nobody is told.
  v1::KvHandoff altered = genuine;
  altered.set_block_ids(0, genuine.block_ids(0) + 1);
  v1::KvHandoff unsigned_handoff = genuine;
  unsigned_handoff.clear_mac();
  v1::KvHandoff foreign = genuine;
  ClusterAuth('x')->Sign(&foreign);
  for (const v1::KvHandoff* forged : {&altered, &unsigned_handoff, &foreign}) {
    const grpc::Status status = source.ExportKv("mig", *forged, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  }
  EXPECT_TRUE(destination.PoolBytes() == pool_before);
  EXPECT_EQ(destination.engine->Stats().num_awaiting_kv, 1);
  EXPECT_EQ(source.engine->Stats().num_paused, 1);

  // 2. An unknown router id: NOT_FOUND, and the destination frees that reservation at once.
  {
    std::unique_ptr<MigrationStream> other = ReserveFor(destination, "other-1", moving, false);
    const grpc::Status status = source.ExportKv("nobody", other->events[0].handoff(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    const grpc::Status ended = other->Finish();
    EXPECT_EQ(ended.error_code(), grpc::StatusCode::ABORTED) << ended.error_message();
    EXPECT_TRUE(other->tokens.empty());
  }
  // 3. A request that is not paused (a reservation on the source still awaiting its KV):
  //    FAILED_PRECONDITION, and the destination is told.
  {
    MigrationStream waiting(source, MigrationRequestOf<v1::ReserveRequest>(
                                        "waiting", MigrationPrompt(3), kMigrationMaxTokens, false));
    ASSERT_TRUE(waiting.Next());  // its handoff: the router id is bound
    std::unique_ptr<MigrationStream> other = ReserveFor(destination, "other-2", moving, false);
    const grpc::Status status = source.ExportKv("waiting", other->events[0].handoff(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
    const grpc::Status ended = other->Finish();
    EXPECT_EQ(ended.error_code(), grpc::StatusCode::ABORTED) << ended.error_message();
    waiting.context.TryCancel();
    EXPECT_EQ(waiting.Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  EXPECT_TRUE(destination.PoolBytes() == pool_before);

  // 4. The genuine handoff was never admitted by the refusals: it moves the request now.
  const grpc::Status status = source.ExportKv("mig", genuine, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const grpc::Status arrived = arriving->Finish();
  ASSERT_TRUE(arrived.ok()) << arrived.error_message();
  // (Read once the request ended: until then the destination's engine writes its pool.)
  EXPECT_EQ(destination.BlockBytes(BlocksOf(genuine)).size(),
            static_cast<size_t>(response.bytes_transferred()));
  EXPECT_FALSE(destination.PoolBytes() == pool_before);
  EXPECT_EQ(moving.tokens.size() + arriving->tokens.size(),
            static_cast<size_t>(kMigrationMaxTokens));
  // ... and a replay of it is refused.
  v1::ExportKvResponse replayed;
  EXPECT_EQ(source.ExportKv("mig", genuine, &replayed).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  const PrometheusText scrape = ScrapeUntil(source.metrics, [](const PrometheusText& s) {
    return s.Sum("tandem_decode_kv_exports_total") == 7;
  });
  EXPECT_EQ(scrape.Value("tandem_decode_kv_exports_total", {{"result", "ok"}}), 1);
  EXPECT_EQ(scrape.Value("tandem_decode_kv_exports_total", {{"result", "failed"}}), 6);
  EXPECT_EQ(scrape.Value("tandem_decode_kv_export_bytes_total"), response.bytes_transferred());
}

TEST(DecodeServiceExportKvTest, ASecondExportWhileTheFirstReadsIsRefusedAndKeepsTheFirstsHold) {
  MigrationNode source;
  MigrationNode destination;
  const Streamed full = RunUninterrupted(source, GenerateOf("reference", false));
  source.backend->AllowSteps(5);
  MigrationStream moving(source, GenerateOf("mig", false));
  PauseAfter(source, moving, "mig", 5);
  std::unique_ptr<MigrationStream> first = ReserveFor(destination, "mig", moving, false);
  std::unique_ptr<MigrationStream> second = ReserveFor(destination, "mig-again", moving, false);

  // The first export's writes are held on the wire; the second comes while they are.
  source.transport.Pause();
  grpc::Status first_status;
  grpc::Status second_status;
  v1::ExportKvResponse first_response;
  v1::ExportKvResponse second_response;
  std::thread first_export(
      [&] { first_status = source.ExportKv("mig", first->events[0].handoff(), &first_response); });
  ASSERT_TRUE(AwaitPending(source.transport, 1));  // the first writer's write
  std::thread second_export([&] {
    second_status = source.ExportKv("mig", second->events[0].handoff(), &second_response);
  });
  ASSERT_TRUE(AwaitPending(source.transport, 2));  // the second writer's failure notice

  // The refused export released nothing: a resume now waits for the first one's release. (A
  // Generate run to its end after the resume shows the engine has taken the resume.)
  EXPECT_TRUE(source.Resume("mig").found());
  RunUninterrupted(source, GenerateOf("barrier", false, 1));
  EXPECT_EQ(source.engine->Stats().num_paused, 1);

  source.transport.Resume();
  first_export.join();
  second_export.join();
  ASSERT_TRUE(first_status.ok()) << first_status.error_message();
  EXPECT_EQ(second_status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << second_status.error_message();
  EXPECT_EQ(second->Finish().error_code(), grpc::StatusCode::ABORTED);
  // The KV landed as it was when the first export read it (the destination checked the block
  // checksums), and both streams go on exactly as the uninterrupted run.
  const grpc::Status arrived = first->Finish();
  ASSERT_TRUE(arrived.ok()) << arrived.error_message();
  const size_t k = moving.tokens.size();
  EXPECT_EQ(first->tokens, std::vector<int>(full.tokens.begin() + k, full.tokens.end()));
  ASSERT_TRUE(moving.Finish().ok());
  EXPECT_EQ(moving.tokens, full.tokens);
}

}  // namespace
}  // namespace tandem
