// The HTTP API's endpoints and the small answers that need no request thread: which endpoint a
// path names and which method it takes, API-key checks, and the JSON of GET /v1/models,
// /health and /ready.
#ifndef TANDEM_ROUTER_HTTP_HTTP_ROUTES_H_
#define TANDEM_ROUTER_HTTP_HTTP_ROUTES_H_

#include <cstdint>
#include <string>
#include <string_view>

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

// Whether `authorization` (the Authorization header) is "Bearer <api_key>" (the scheme in any
// case). Compares in time independent of where the key differs.
bool AuthorizedBearer(std::string_view authorization, std::string_view api_key);

// {"object": "list", "data": [{"id", "object": "model", "created", "owned_by": "tandem",
// "max_model_len"}]}.
nlohmann::ordered_json ModelsJson(const ServedModel& model, int64_t created);
// GET /ready's body: {"status": "ready"} or {"status": "not ready", "reason": ...}.
nlohmann::ordered_json ReadyJson(const absl::Status& ready);
nlohmann::ordered_json HealthJson();

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_HTTP_ROUTES_H_
