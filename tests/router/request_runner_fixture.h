// The fixture of the RequestRunner tests that run without gRPC servers: FakeNodeClients behind a
// fixed NodeDirectory (fake_node_client.h), and a sink that collects what the client got.
#ifndef TANDEM_TESTS_ROUTER_REQUEST_RUNNER_FIXTURE_H_
#define TANDEM_TESTS_ROUTER_REQUEST_RUNNER_FIXTURE_H_

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "router/request_runner.h"
#include "router/router_metrics.h"
#include "tests/router/fake_node_client.h"
#include "tests/router/router_test_util.h"

namespace tandem::testing {

class CollectingSink : public ResponseSink {
 public:
  void Write(const v1::GenerateResponse& response, WriteDone done) override {
    responses.push_back(response);
    done(true);
  }
  bool ClientGone() override { return false; }
  void Abort() override {}

  std::string text() const {
    std::string out;
    for (const auto& r : responses) out += r.text();
    return out;
  }
  std::vector<v1::GenerateResponse> responses;
};

class RequestRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.first_token_timeout_ms = 10000;
    options_.request_timeout_ms = 20000;
    // The fake nodes script a disaggregated flow (router_test_util.h, TestRouterOptions).
    options_.placement.policy = PlacementPolicy::kPrefixAware;
  }

  void Add(const FakeNode& node) { directory_.Add(node); }

  grpc::Status Run(const std::string& text, CollectingSink& sink,
                   const std::vector<std::string>& stop = {}) {
    RequestRunner runner(TestServedModel(), &directory_, options_, &counters_, &metrics_);
    v1::GenerateRequest request;
    request.set_text(text);
    request.mutable_sampling()->set_max_tokens(16);
    for (const std::string& s : stop) request.add_stop(s);
    return runner.Run(request, RunOptions(), sink);
  }

  static std::vector<int32_t> Encode(const std::string& text) {
    return TestServedModel()->tokenizer->Encode(text, false);
  }

  RouterOptions options_;
  FakeNodeDirectory directory_;
  RouterCounters counters_;
  RouterMetrics metrics_{&counters_, nullptr};
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_ROUTER_REQUEST_RUNNER_FIXTURE_H_
