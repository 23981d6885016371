// tandem-decode's drain (decode_drain.h) on real decode nodes over loopback gRPC: with live KV
// migration it reports draining, refuses new requests, pauses every running one, keeps serving the
// router's ExportKv / Cancel / ResumePaused calls, and stops as soon as the node holds no request,
// long before its drain time; without it, a stream decodes to its end.
#include "decode_node/decode_drain.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/decode_node/decode_migration_nodes.h"

namespace tandem {
namespace {

using ::tandem::testing::GenerateOf;
using ::tandem::testing::kMigrationMaxTokens;
using ::tandem::testing::MigrationNode;
using ::tandem::testing::MigrationPrompt;
using ::tandem::testing::MigrationRequestOf;
using ::tandem::testing::MigrationStream;
using ::tandem::testing::ReserveFor;
using ::tandem::testing::RunUninterrupted;
using ::tandem::testing::Streamed;

constexpr absl::Duration kDrain = absl::Seconds(20);

// The node's GetLoad answer (an error status when it takes no calls).
grpc::Status GetLoad(MigrationNode& node, v1::NodeLoad* load) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  return node.stub->GetLoad(&context, v1::LoadRequest(), load);
}

// Waits (at most 10 s) until the node reports draining, or (`refused`) takes no calls at all.
bool AwaitDraining(MigrationNode& node, bool refused = false) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (absl::Now() < until) {
    v1::NodeLoad load;
    const grpc::Status status = GetLoad(node, &load);
    if (refused ? !status.ok() : load.draining()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

// Runs DrainDecodeNode on `node` in a thread; `cut` tells whether the drain time ran out.
struct DrainThread {
  DrainThread(MigrationNode& node, bool live_migration, absl::Duration drain = kDrain)
      : thread([this, &node, live_migration, drain] {
          DrainDecodeNode(*node.server.server, *node.service, *node.engine,
                          {.drain = drain, .live_migration = live_migration}, [this, &node] {
                            cut = true;
                            node.engine->Stop(absl::AbortedError("drain timeout"));
                          });
        }) {}
  ~DrainThread() {
    if (thread.joinable()) thread.join();
  }

  const absl::Time start = absl::Now();
  std::atomic<bool> cut{false};
  std::thread thread;
};

// A stream on `node`, paused by PauseForMigration after its first token.
std::unique_ptr<MigrationStream> PausedStream(MigrationNode& node, const std::string& router_id,
                                              int salt) {
  node.backend->AllowSteps(1);
  auto stream = std::make_unique<MigrationStream>(node, GenerateOf(router_id, false, salt));
  EXPECT_TRUE(stream->ReadTokens(1));
  EXPECT_TRUE(node.Pause(router_id).found());
  node.backend->Open();
  EXPECT_TRUE(stream->ReadUntilPaused());
  return stream;
}

TEST(DecodeDrainTest, LiveMigrationServesTheRoutersCallsThenStopsOnceNothingIsLeft) {
  MigrationNode source;
  MigrationNode destination;
  const Streamed full_a = RunUninterrupted(source, GenerateOf("reference-a", false, 0));
  const Streamed full_b = RunUninterrupted(source, GenerateOf("reference-b", false, 1));
  // `b` paused already; `keep` too, until the end, so that the server takes calls until the others
  // were read to their end (a server that stops resets its connections, losing what a client had
  // not read yet).
  std::unique_ptr<MigrationStream> b = PausedStream(source, "b", 1);
  std::unique_ptr<MigrationStream> keep = PausedStream(source, "keep", 2);
  // `a` under way, the engine held in its next step, when the drain begins.
  source.backend->AllowSteps(1);
  MigrationStream a(source, GenerateOf("a", false, 0));
  ASSERT_TRUE(a.ReadTokens(1));
  DrainThread drain(source, /*live_migration=*/true);
  ASSERT_TRUE(AwaitDraining(source));  // the pause was asked for before
  source.backend->Open();
  ASSERT_TRUE(a.ReadUntilPaused());
  v1::NodeLoad load;
  ASSERT_TRUE(GetLoad(source, &load).ok());
  EXPECT_TRUE(load.draining());
  EXPECT_EQ(source.AwaitStats([](const EngineStats& s) { return s.num_paused == 3; }).num_paused,
            3);
  // New requests are refused; the router places them elsewhere.
  MigrationStream refused(source, GenerateOf("new", false, 3));
  EXPECT_EQ(refused.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(refused.tokens.empty());
  MigrationStream refused_reserve(
      source, MigrationRequestOf<v1::ReserveRequest>("new", MigrationPrompt(3), kMigrationMaxTokens,
                                                     false));
  EXPECT_EQ(refused_reserve.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);

  // The router moves `a` with its KV: the draining node still takes ExportKv and Cancel.
  std::unique_ptr<MigrationStream> arriving = ReserveFor(destination, "a", a, false);
  v1::ExportKvResponse exported;
  const grpc::Status status = source.ExportKv("a", arriving->events[0].handoff(), &exported);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(source.Cancel("a").ok());
  ASSERT_TRUE(arriving->Finish().ok());
  ASSERT_TRUE(a.Finish().ok());
  EXPECT_EQ(a.finish_reason, "abort");
  std::vector<int> moved = a.tokens;
  moved.insert(moved.end(), arriving->tokens.begin(), arriving->tokens.end());
  EXPECT_EQ(moved, full_a.tokens);
  // ... and finds no room for `b`: it resumes it here, where it runs to its end.
  EXPECT_TRUE(source.Resume("b").found());
  ASSERT_TRUE(b->Finish().ok());
  EXPECT_EQ(b->tokens, full_b.tokens);
  EXPECT_EQ(b->pauses, 1);
  ASSERT_TRUE(source.Cancel("keep").ok());
  keep->Finish();

  // Nothing is left: the drain ends long before its time, and the server is gone.
  drain.thread.join();
  EXPECT_FALSE(drain.cut);
  EXPECT_LT(absl::Now() - drain.start, kDrain / 2);
  EXPECT_FALSE(GetLoad(source, &load).ok());
}

TEST(DecodeDrainTest, WithoutLiveMigrationAStreamDecodesToItsEnd) {
  MigrationNode node;
  const Streamed full = RunUninterrupted(node, GenerateOf("reference", false));
  // A reservation whose KV never comes keeps the drain going to its end (so that the server does
  // not stop, resetting its connections, before the stream was read to its end).
  MigrationStream held(node, MigrationRequestOf<v1::ReserveRequest>("held", MigrationPrompt(3),
                                                                    kMigrationMaxTokens, false));
  ASSERT_TRUE(held.Next());
  node.backend->AllowSteps(1);
  MigrationStream stream(node, GenerateOf("a", false));
  ASSERT_TRUE(stream.ReadTokens(1));
  DrainThread drain(node, /*live_migration=*/false, absl::Seconds(2));
  ASSERT_TRUE(AwaitDraining(node, /*refused=*/true));  // the ordinary drain has begun
  node.backend->Open();
  const grpc::Status status = stream.Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(stream.tokens, full.tokens);
  EXPECT_EQ(stream.pauses, 0);
  drain.thread.join();
  EXPECT_TRUE(drain.cut);  // the reservation, at the drain timeout
  EXPECT_EQ(node.engine->Stats().num_paused, 0);
  held.Finish();
}

}  // namespace
}  // namespace tandem
