// The fixture of the Generation service's end-to-end tests: a router in this process in front of
// fake prefill and decode node servers on loopback (tests/router/fake_nodes.h).
#ifndef TANDEM_TESTS_ROUTER_GENERATE_SERVICE_FIXTURE_H_
#define TANDEM_TESTS_ROUTER_GENERATE_SERVICE_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "router/node.h"
#include "router/router_server.h"
#include "router/served_model.h"
#include "tests/router/fake_nodes.h"
#include "tests/router/router_test_util.h"

namespace tandem::testing {

inline bool WaitUntil(const std::function<bool()>& pred) { return FakeDecodeNode::WaitUntil(pred); }

class GenerateServiceTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (router_ != nullptr) router_->Shutdown(absl::Seconds(5));
    router_.reset();
  }

  // Starts the router and waits until every configured node is up with its load known, so that
  // placement sees the nodes the test set up (the first health check has a 50 ms deadline, which
  // a loaded machine misses). Tests that start with a node down use StartRouterWithNodesDown.
  void StartRouter(const RouterOptions& options) {
    StartRouterWithNodesDown(options);
    if (router_ == nullptr) return;
    const std::pair<NodeRole, const std::vector<std::string>*> roles[] = {
        {NodeRole::kPrefill, &options.pool.prefill.addresses},
        {NodeRole::kDecode, &options.pool.decode.addresses}};
    for (const auto& entry : roles) {
      const NodeRole role = entry.first;
      for (const std::string& address : *entry.second) {
        ASSERT_TRUE(WaitUntil([&] {
          std::shared_ptr<Node> node = PoolNode(role, address);
          return node != nullptr && node->up();
        })) << NodeRoleName(role)
            << " node " << address << " never came up";
      }
    }
  }

  void StartRouterWithNodesDown(const RouterOptions& options) {
    auto router = RouterServer::Start(options);
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = *std::move(router);
    stub_ = RouterStub(router_->address());
  }

  static std::vector<int32_t> Encode(const std::string& text, bool special = false) {
    return TestServedModel()->tokenizer->Encode(text, special);
  }

  static DecodeScript Script(const std::string& text) {
    DecodeScript s;
    s.tokens = Encode(text);
    return s;
  }

  // d1 (picked first) streams two tokens, then dies; d2 would stream " other".
  void DecodeOneDiesAfterTwoTokens() {
    DecodeScript script = Script(" one two three four five");
    script.fail_after_tokens = 2;
    script.stream_error = grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode node died");
    d1_.SetScript(script);
    d1_.SetLoad(5000);
    d2_.SetScript(Script(" other"));
  }

  static v1::GenerateRequest TextRequest(const std::string& text, const std::string& id = "") {
    v1::GenerateRequest r;
    r.set_text(text);
    r.set_request_id(id);
    return r;
  }

  const RouterCounters& counters() { return router_->counters(); }

  std::shared_ptr<Node> PoolNode(NodeRole role, const std::string& address) {
    for (const auto& n : router_->pool().Nodes(role)) {
      if (n->address() == address) return n;
    }
    return nullptr;
  }

  // Nodes first: they outlive the router (members are destroyed in reverse order).
  FakePrefillNode p1_, p2_;
  FakeDecodeNode d1_, d2_;
  std::unique_ptr<RouterServer> router_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_ROUTER_GENERATE_SERVICE_FIXTURE_H_
