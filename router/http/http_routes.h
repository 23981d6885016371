// The HTTP API's endpoints and the small answers that need no request thread: which endpoint a
// path names and which method it takes, API-key checks, and the JSON of GET /v1/models,
// /health and /ready.
#ifndef TANDEM_ROUTER_HTTP_HTTP_ROUTES_H_
#define TANDEM_ROUTER_HTTP_HTTP_ROUTES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "router/served_model.h"

namespace tandem {

enum class Route { kUnknown, kHealth, kReady, kModels, kCompletions, kChatCompletions };

struct RouteInfo {
  Route route = Route::kUnknown;
  std::string_view method;  // the one method it takes ("GET" / "POST")
  bool needs_api_key = false;
};

// `target` is the request target; a query string is ignored.
RouteInfo MatchRoute(std::string_view target);

// {"object": "list", "data": [{"id", "object": "model", "created", "owned_by": "tandem",
// "max_model_len"}]}.
nlohmann::ordered_json ModelsJson(const ServedModel& model, int64_t created);
// GET /ready's body: {"status": "ready"} or {"status": "not ready", "reason": ...}.
// GET /ready's verdict: 503 unless `status` is OK; `notes` name what is degraded without making
// the router unready (a decode node whose KV cache is exhausted while others have room).
struct Readiness {
  Readiness(absl::Status s = absl::OkStatus(), std::vector<std::string> n = {})  // NOLINT
      : status(std::move(s)), notes(std::move(n)) {}
  absl::Status status;
  std::vector<std::string> notes;
};
nlohmann::ordered_json ReadyJson(const Readiness& ready);
nlohmann::ordered_json HealthJson();

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_HTTP_ROUTES_H_
