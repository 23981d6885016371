// Endpoint matching, the Bearer API-key check and the JSON of /v1/models, /health and /ready.
#include "router/http/http_routes.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

using ordered_json = nlohmann::ordered_json;

TEST(HttpRoutesTest, MatchesEndpoints) {
  EXPECT_EQ(MatchRoute("/v1/completions").route, Route::kCompletions);
  EXPECT_EQ(MatchRoute("/v1/completions").method, "POST");
  EXPECT_TRUE(MatchRoute("/v1/completions").needs_api_key);
  EXPECT_EQ(MatchRoute("/v1/chat/completions").route, Route::kChatCompletions);
  EXPECT_EQ(MatchRoute("/v1/models").route, Route::kModels);
  EXPECT_EQ(MatchRoute("/v1/models").method, "GET");
  EXPECT_TRUE(MatchRoute("/v1/models").needs_api_key);
  EXPECT_EQ(MatchRoute("/health").route, Route::kHealth);
  EXPECT_FALSE(MatchRoute("/health").needs_api_key);
  EXPECT_EQ(MatchRoute("/ready?verbose=1").route, Route::kReady);
  EXPECT_FALSE(MatchRoute("/ready").needs_api_key);
  EXPECT_EQ(MatchRoute("/v1/completion").route, Route::kUnknown);
  EXPECT_EQ(MatchRoute("/").route, Route::kUnknown);
  EXPECT_EQ(MatchRoute("").route, Route::kUnknown);
}

TEST(HttpRoutesTest, ModelsJson) {
  ServedModel model;
  model.name = "llama-test";
  model.config.max_position_embeddings = 4096;
  EXPECT_EQ(
      ModelsJson(model, 1700000000),
      ordered_json::parse(R"({"object": "list", "data": [{"id": "llama-test", "object": "model",
                "created": 1700000000, "owned_by": "tandem", "max_model_len": 4096}]})"));
}

TEST(HttpRoutesTest, ReadyAndHealthJson) {
  EXPECT_EQ(ReadyJson(absl::OkStatus()), ordered_json::parse(R"({"status": "ready"})"));
  EXPECT_EQ(ReadyJson(absl::UnavailableError("no decode node is up")),
            ordered_json::parse(R"({"status": "not ready", "reason": "no decode node is up"})"));
  EXPECT_EQ(
      ReadyJson(Readiness(absl::OkStatus(), {"1 of 2 decode nodes have their KV cache "
                                             "exhausted"})),
      ordered_json::parse(R"({"status": "ready", "notes": ["1 of 2 decode nodes have their KV )"
                          R"(cache exhausted"]})"));
  EXPECT_EQ(HealthJson(), ordered_json::parse(R"({"status": "ok"})"));
}

}  // namespace
}  // namespace tandem
