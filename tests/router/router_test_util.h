// Helpers for the router's end-to-end tests: the test model, a router in this process, and a
// client that collects a Generate stream.
#ifndef TANDEM_TESTS_ROUTER_ROUTER_TEST_UTIL_H_
#define TANDEM_TESTS_ROUTER_ROUTER_TEST_UTIL_H_

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "router/router_options.h"
#include "router/served_model.h"
#include "tandem/v1/generate.grpc.pb.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {

// The llama test model (tokenizer, chat template), loaded once per test binary.
inline const std::shared_ptr<const ServedModel>& TestServedModel() {
  static const std::shared_ptr<const ServedModel>* const model = [] {
    absl::StatusOr<std::shared_ptr<const ServedModel>> loaded =
        LoadServedModel(TestModelDir("llama"), "");
    if (!loaded.ok()) {
      std::fprintf(stderr, "loading the test model: %s\n", loaded.status().ToString().c_str());
      std::abort();
    }
    return new std::shared_ptr<const ServedModel>(*std::move(loaded));
  }();
  return *model;
}

struct StreamResult {
  std::vector<v1::GenerateResponse> responses;
  grpc::Status status;

  std::string text() const {
    std::string out;
    for (const auto& r : responses) out += r.text();
    return out;
  }
  std::vector<int32_t> token_ids() const {
    std::vector<int32_t> out;
    for (const auto& r : responses) {
      for (const auto& t : r.tokens()) out.push_back(t.id());
    }
    return out;
  }
  std::string finish_reason() const {
    return responses.empty() ? "" : responses.back().finish_reason();
  }
};

inline std::unique_ptr<v1::Generation::Stub> RouterStub(const std::string& address) {
  return v1::Generation::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

// Runs one Generate call to the end. `after_response` (optional) sees each response and may
// cancel `ctx`.
template <typename AfterResponse>
StreamResult RunGenerate(v1::Generation::Stub& stub, const v1::GenerateRequest& request,
                         grpc::ClientContext* ctx, AfterResponse after_response) {
  StreamResult result;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader = stub.Generate(ctx, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    result.responses.push_back(response);
    after_response(result.responses.size());
  }
  result.status = reader->Finish();
  return result;
}

// No client deadline: the router's own request timeout (TestRouterOptions: 20 s) bounds it.
inline StreamResult RunGenerate(v1::Generation::Stub& stub, const v1::GenerateRequest& request) {
  grpc::ClientContext ctx;
  return RunGenerate(stub, request, &ctx, [](size_t) {});
}

// Options for a router in tests: fast health checks, loopback.
inline RouterOptions TestRouterOptions(std::vector<std::string> prefill,
                                       std::vector<std::string> decode) {
  RouterOptions o;
  o.model_dir = TestModelDir("llama");
  o.listen = "127.0.0.1:0";
  o.pool.prefill.addresses = std::move(prefill);
  o.pool.decode.addresses = std::move(decode);
  o.pool.health_interval_ms = 50;
  o.request_timeout_ms = 20000;
  o.first_token_timeout_ms = 10000;
  // The fake nodes script a disaggregated flow: a policy that always sends the prompt to a
  // prefill node (the default, cost, may prefill on an idle decode node instead).
  o.placement.policy = PlacementPolicy::kPrefixAware;
  return o;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_ROUTER_ROUTER_TEST_UTIL_H_
