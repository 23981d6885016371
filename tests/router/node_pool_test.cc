// NodePool against fake node servers: health (gRPC health + GetLoad) marks nodes up and down,
// failed RPCs mark them down until they answer again, restarts are noticed, DNS membership
// follows an injected resolver, and WatchKvEvents feeds the prefix-cache view.
#include "router/node_pool.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/kv/block_hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "router/dns_resolver.h"
#include "router/node_probe.h"
#include "tests/router/fake_nodes.h"

namespace tandem {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using testing::FakeDecodeNode;
using testing::FakePrefillNode;
using ::testing::HasSubstr;

std::vector<std::string> Addresses(const std::vector<std::shared_ptr<Node>>& nodes) {
  std::vector<std::string> out;
  for (const auto& n : nodes) out.push_back(n->address());
  return out;
}

bool PoolWaitUntil(const std::function<bool()>& pred) { return FakeDecodeNode::WaitUntil(pred); }

// A resolver whose answers the test sets.
class FakeResolver : public DnsResolver {
 public:
  void Set(const std::string& name, absl::StatusOr<std::vector<std::string>> answer) {
    absl::MutexLock lock(&mu_);
    answers_.insert_or_assign(name, std::move(answer));
  }
  absl::StatusOr<std::vector<std::string>> Resolve(const std::string& name_port) override {
    absl::MutexLock lock(&mu_);
    auto it = answers_.find(name_port);
    if (it == answers_.end()) return absl::NotFoundError("unknown name " + name_port);
    return it->second;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, absl::StatusOr<std::vector<std::string>>> answers_;
};

NodePoolOptions StaticOptions(std::vector<std::string> prefill, std::vector<std::string> decode) {
  NodePoolOptions o;
  o.prefill.addresses = std::move(prefill);
  o.decode.addresses = std::move(decode);
  // The tests drive health rounds themselves; the background ones rarely run.
  o.health_interval_ms = 60000;
  o.dns_refresh_ms = 60000;
  return o;
}

TEST(SplitHostPortTest, AcceptsHostPortAndBracketedV6) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort("10.1.2.3:8000", &host, &port).ok());
  EXPECT_EQ(host, "10.1.2.3");
  EXPECT_EQ(port, 8000);
  ASSERT_TRUE(SplitHostPort("[::1]:9", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 9);
  ASSERT_TRUE(SplitHostPort("decode.svc.cluster.local:50051", &host, &port).ok());
  for (const char* bad : {"nohost", ":80", "host:", "host:0", "host:70000", "host:8x"}) {
    EXPECT_FALSE(SplitHostPort(bad, &host, &port).ok()) << bad;
  }
}

TEST(GetAddrInfoResolverTest, ResolvesLocalhost) {
  GetAddrInfoResolver resolver;
  auto addresses = resolver.Resolve("localhost:4321");
  ASSERT_TRUE(addresses.ok()) << addresses.status();
  EXPECT_THAT(*addresses, Contains("127.0.0.1:4321"));
  EXPECT_EQ(resolver.Resolve("localhost").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(resolver.Resolve("no-such-host.invalid:80").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(HealthCheckResponseTest, ParsesServingStatus) {
  EXPECT_EQ(ParseHealthCheckResponse(""), 0);
  EXPECT_EQ(ParseHealthCheckResponse(std::string("\x08\x01", 2)), 1);
  EXPECT_EQ(ParseHealthCheckResponse(std::string("\x08\x02", 2)), 2);
  EXPECT_EQ(ParseHealthCheckResponse(std::string("\x12\x00", 2)), -1);
  EXPECT_EQ(ParseHealthCheckResponse(std::string("\x08", 1)), -1);
}

TEST(NodePoolTest, HealthyNodesAreUpAfterStart) {
  FakePrefillNode p;
  FakeDecodeNode d1, d2;
  NodePool pool(StaticOptions({p.address()}, {d1.address(), d2.address()}));
  ASSERT_TRUE(pool.Start().ok());
  EXPECT_THAT(Addresses(pool.UpNodes(NodeRole::kPrefill)), ElementsAre(p.address()));
  EXPECT_EQ(pool.UpNodes(NodeRole::kDecode).size(), 2u);
  Node::Snapshot s = pool.UpNodes(NodeRole::kDecode)[0]->snapshot();
  EXPECT_TRUE(s.up);
  EXPECT_EQ(s.load.role(), "decode");
  EXPECT_EQ(s.load.num_free_kv_blocks(), 1000);
  EXPECT_EQ(pool.counters().marked_up.load(), 3);
}

// A node that answers its first check late (a TLS handshake on a busy machine) is still up when
// Start() returns: the first round waits first_check_timeout_ms, not one health interval.
TEST(NodePoolTest, TheFirstRoundWaitsForSlowNodes) {
  FakeDecodeNode d;
  d.SetLoadDelay(absl::Milliseconds(300));
  NodePoolOptions options = StaticOptions({}, {d.address()});
  options.health_interval_ms = 100;
  options.first_check_timeout_ms = 5000;
  NodePool pool(options);
  ASSERT_TRUE(pool.Start().ok());
  EXPECT_EQ(pool.UpNodes(NodeRole::kDecode).size(), 1u);

  // With the first round only one interval long, the same node is not up yet.
  FakeDecodeNode slow;
  slow.SetLoadDelay(absl::Milliseconds(300));
  options = StaticOptions({}, {slow.address()});
  options.health_interval_ms = 100;
  options.first_check_timeout_ms = 100;
  NodePool hasty(options);
  ASSERT_TRUE(hasty.Start().ok());
  EXPECT_TRUE(hasty.UpNodes(NodeRole::kDecode).empty());
  EXPECT_THAT(hasty.Nodes(NodeRole::kDecode)[0]->snapshot().last_error,
              HasSubstr("DEADLINE_EXCEEDED"));
}

TEST(NodePoolTest, RejectsMalformedAddresses) {
  NodePool pool(StaticOptions({}, {"not-an-address"}));
  EXPECT_EQ(pool.Start().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NodePoolTest, ANodeOfTheWrongRoleStaysDown) {
  FakeDecodeNode d;
  NodePool pool(StaticOptions({d.address()}, {}));  // a decode node configured as prefill
  ASSERT_TRUE(pool.Start().ok());
  EXPECT_TRUE(pool.UpNodes(NodeRole::kPrefill).empty());
  Node::Snapshot s = pool.Nodes(NodeRole::kPrefill)[0]->snapshot();
  EXPECT_FALSE(s.up);
  EXPECT_THAT(s.last_error, HasSubstr("UNIMPLEMENTED"));
  EXPECT_THAT(s.last_error, HasSubstr("not a prefill node?"));
}

TEST(NodePoolTest, NotServingGoesDownAndComesBack) {
  FakeDecodeNode d;
  NodePool pool(StaticOptions({}, {d.address()}));
  ASSERT_TRUE(pool.Start().ok());
  ASSERT_EQ(pool.UpNodes(NodeRole::kDecode).size(), 1u);
  d.SetServing(false);
  pool.CheckHealth();
  EXPECT_TRUE(pool.UpNodes(NodeRole::kDecode).empty());
  EXPECT_THAT(pool.Nodes(NodeRole::kDecode)[0]->snapshot().last_error, HasSubstr("NOT_SERVING"));
  EXPECT_EQ(pool.counters().marked_down.load(), 1);
  d.SetServing(true);
  pool.CheckHealth();
  EXPECT_EQ(pool.UpNodes(NodeRole::kDecode).size(), 1u);
}

TEST(NodePoolTest, BusyIsNotDeadWhileItsStreamsProgress) {
  FakeDecodeNode d;
  NodePoolOptions options = StaticOptions({}, {d.address()});
  options.health_interval_ms = 100;  // each check has 100 ms
  options.node_down_after_ms = 1000;
  ManualClock clock;
  NodePool pool(options, nullptr, &clock);
  ASSERT_TRUE(pool.Start().ok());
  std::shared_ptr<Node> node = pool.Nodes(NodeRole::kDecode)[0];
  ASSERT_TRUE(node->up());

  d.SetLoadDelay(absl::Milliseconds(400));
  pool.CheckHealth();  // times out: slow, still up
  EXPECT_TRUE(node->up());
  EXPECT_GE(pool.counters().slow_checks.load(), 1);
  // Its streams deliver tokens: checks failing for longer than the window do not matter.
  node->NoteProgress(clock.Now());
  clock.AdvanceSeconds(0.9);
  node->NoteProgress(clock.Now());
  clock.AdvanceSeconds(0.9);
  pool.CheckHealth();
  EXPECT_TRUE(node->up());
  EXPECT_EQ(pool.counters().marked_down.load(), 0);
  // The streams stall too, for the whole window: now it is down.
  clock.AdvanceSeconds(1.1);
  pool.CheckHealth();
  EXPECT_FALSE(node->up());
  EXPECT_THAT(node->snapshot().last_error, HasSubstr("DEADLINE_EXCEEDED"));
  // It answers again: up, and the slow count starts over.
  d.SetLoadDelay(absl::ZeroDuration());
  ASSERT_TRUE(FakeDecodeNode::WaitUntil([&] {
    pool.CheckHealth();
    return node->up();
  }));
}

TEST(NodePoolTest, ARefusedConnectionIsDownAtOnce) {
  FakeDecodeNode d;
  NodePoolOptions options = StaticOptions({}, {d.address()});
  options.node_down_after_ms = 60000;
  NodePool pool(options);
  ASSERT_TRUE(pool.Start().ok());
  std::shared_ptr<Node> node = pool.Nodes(NodeRole::kDecode)[0];
  node->NoteProgress(absl::Now());
  d.Kill();
  pool.CheckHealth();
  EXPECT_FALSE(node->up());  // dead, not slow: no waiting for node_down_after_ms
}

TEST(NodePoolTest, AFailedRpcMarksDownUntilTheNextCheckPasses) {
  FakeDecodeNode d;
  NodePool pool(StaticOptions({}, {d.address()}));
  ASSERT_TRUE(pool.Start().ok());
  std::shared_ptr<Node> node = pool.Nodes(NodeRole::kDecode)[0];
  pool.ReportFailure(node, "Reserve: connection reset");
  EXPECT_FALSE(node->up());
  EXPECT_EQ(node->snapshot().last_error, "Reserve: connection reset");
  pool.CheckHealth();
  EXPECT_TRUE(node->up());
}

TEST(NodePoolTest, DeadNodeGoesDownAndARestartIsNoticed) {
  FakeDecodeNode d;
  NodePool pool(StaticOptions({}, {d.address()}));
  ASSERT_TRUE(pool.Start().ok());
  std::shared_ptr<Node> node = pool.Nodes(NodeRole::kDecode)[0];
  const uint64_t first = node->snapshot().load.incarnation();
  EXPECT_EQ(first, d.incarnation());
  d.Kill();
  pool.CheckHealth();
  EXPECT_FALSE(node->up());
  d.Restart();  // same port, new incarnation
  ASSERT_TRUE(PoolWaitUntil([&] {
    pool.CheckHealth();
    return node->up();
  }));
  EXPECT_NE(node->snapshot().load.incarnation(), first);
  EXPECT_EQ(pool.counters().incarnation_changes.load(), 1);
}

TEST(NodePoolTest, BackgroundChecksBringANodeBack) {
  FakeDecodeNode d;
  NodePoolOptions o = StaticOptions({}, {d.address()});
  o.health_interval_ms = 20;
  NodePool pool(o);
  ASSERT_TRUE(pool.Start().ok());
  std::shared_ptr<Node> node = pool.Nodes(NodeRole::kDecode)[0];
  d.SetServing(false);
  EXPECT_TRUE(PoolWaitUntil([&] { return !node->up(); }));
  d.SetServing(true);
  EXPECT_TRUE(PoolWaitUntil([&] { return node->up(); }));
}

TEST(NodePoolTest, DnsMembershipFollowsTheName) {
  FakeDecodeNode a, b;
  auto resolver = std::make_shared<FakeResolver>();
  resolver->Set("decode.svc:50051", std::vector<std::string>{a.address()});
  NodePoolOptions o = StaticOptions({}, {});
  o.decode.dns_name = "decode.svc:50051";
  NodePool pool(o, resolver);
  ASSERT_TRUE(pool.Start().ok());
  EXPECT_THAT(Addresses(pool.UpNodes(NodeRole::kDecode)), ElementsAre(a.address()));

  // A new pod: checked at once, up without waiting for a health round.
  resolver->Set("decode.svc:50051", std::vector<std::string>{a.address(), b.address()});
  pool.RefreshDns();
  EXPECT_EQ(pool.UpNodes(NodeRole::kDecode).size(), 2u);

  // The name fails to resolve: keep what we know.
  resolver->Set("decode.svc:50051", absl::NotFoundError("NXDOMAIN"));
  pool.RefreshDns();
  EXPECT_EQ(pool.Nodes(NodeRole::kDecode).size(), 2u);
  EXPECT_EQ(pool.counters().dns_failures.load(), 1);

  // A pod left.
  std::shared_ptr<Node> held = pool.Nodes(NodeRole::kDecode)[0];
  resolver->Set("decode.svc:50051", std::vector<std::string>{b.address()});
  pool.RefreshDns();
  EXPECT_THAT(Addresses(pool.Nodes(NodeRole::kDecode)), ElementsAre(b.address()));
  // A request that still holds a removed node can use it.
  EXPECT_FALSE(held->address().empty());
}

TEST(NodePoolTest, BackgroundDnsRefresh) {
  FakeDecodeNode a, b;
  auto resolver = std::make_shared<FakeResolver>();
  resolver->Set("d:1", std::vector<std::string>{a.address()});
  NodePoolOptions o = StaticOptions({}, {});
  o.decode.dns_name = "d:1";
  o.dns_refresh_ms = 20;
  NodePool pool(o, resolver);
  ASSERT_TRUE(pool.Start().ok());
  resolver->Set("d:1", std::vector<std::string>{b.address()});
  EXPECT_TRUE(PoolWaitUntil([&] {
    auto up = pool.UpNodes(NodeRole::kDecode);
    return up.size() == 1 && up[0]->address() == b.address();
  }));
}

TEST(NodePoolTest, KvEventsFeedThePrefixCacheView) {
  FakePrefillNode p;
  p.SetBlockSize(4);
  std::vector<TokenId> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  std::vector<uint64_t> hashes = HashFullBlocks(prompt, 4);
  ASSERT_EQ(hashes.size(), 3u);
  p.StoreBlocks({hashes[0]});  // in the cache before the stream opens: part of the reset

  NodePoolOptions o = StaticOptions({p.address()}, {});
  o.watch_prefill_kv_events = true;
  o.health_interval_ms = 20;
  NodePool pool(o);
  ASSERT_TRUE(pool.Start().ok());
  std::shared_ptr<Node> node = pool.Nodes(NodeRole::kPrefill)[0];
  ASSERT_TRUE(PoolWaitUntil([&] { return node->CachedPrefixBlocks(hashes) == 1; }));
  EXPECT_EQ(node->kv_block_size(), 4);

  p.StoreBlocks({hashes[1], 77});
  ASSERT_TRUE(PoolWaitUntil([&] { return node->CachedPrefixBlocks(hashes) == 2; }));
  EXPECT_EQ(node->num_cached_blocks(), 3u);
  // A hole ends the prefix.
  p.StoreBlocks({hashes[2]});
  p.RemoveBlocks({hashes[0]});
  ASSERT_TRUE(PoolWaitUntil([&] { return node->CachedPrefixBlocks(hashes) == 0; }));
  EXPECT_EQ(node->num_cached_blocks(), 3u);
}

TEST(NodePoolTest, DecodeNodesKvEventsAreWatchedOnlyWhenAsked) {
  FakeDecodeNode d;
  const std::vector<uint64_t> hashes = {11, 12, 13};
  d.SetCachedBlocks(hashes);
  NodePoolOptions o = StaticOptions({}, {d.address()});
  o.watch_prefill_kv_events = true;  // the prefill nodes' alone
  o.health_interval_ms = 20;
  {
    NodePool pool(o);
    ASSERT_TRUE(pool.Start().ok());
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_EQ(d.watch_streams(), 0);
    EXPECT_EQ(pool.Nodes(NodeRole::kDecode)[0]->num_cached_blocks(), 0u);
  }
  o.watch_decode_kv_events = true;
  NodePool pool(o);
  ASSERT_TRUE(pool.Start().ok());
  std::shared_ptr<Node> node = pool.Nodes(NodeRole::kDecode)[0];
  ASSERT_TRUE(PoolWaitUntil([&] { return node->CachedPrefixBlocks(hashes) == 3; }));
  EXPECT_EQ(node->kv_block_size(), 16);  // the fake's
  d.SetCachedBlocks({11, 13});
  ASSERT_TRUE(PoolWaitUntil([&] { return node->CachedPrefixBlocks(hashes) == 1; }));
  EXPECT_EQ(node->num_cached_blocks(), 2u);
}

TEST(NodePoolTest, StopEndsTheWatchStreams) {
  FakePrefillNode p;
  NodePoolOptions o = StaticOptions({p.address()}, {});
  o.watch_prefill_kv_events = true;
  auto pool = std::make_unique<NodePool>(o);
  ASSERT_TRUE(pool->Start().ok());
  ASSERT_TRUE(PoolWaitUntil([&] { return p.watch_streams() == 1; }));
  pool->Stop();  // must not hang on the open stream
  pool.reset();
  SUCCEED();
}

}  // namespace
}  // namespace tandem
