#include "router/http/http_routes.h"

namespace tandem {

RouteInfo MatchRoute(std::string_view target) {
  const size_t query = target.find('?');
  if (query != std::string_view::npos) target = target.substr(0, query);
  if (target == "/health") return {Route::kHealth, "GET", false};
  if (target == "/ready") return {Route::kReady, "GET", false};
  if (target == "/v1/models") return {Route::kModels, "GET", true};
  if (target == "/v1/completions") return {Route::kCompletions, "POST", true};
  if (target == "/v1/chat/completions") return {Route::kChatCompletions, "POST", true};
  return {};
}

nlohmann::ordered_json ModelsJson(const ServedModel& model, int64_t created) {
  nlohmann::ordered_json card = {{"id", model.name},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "tandem"},
                                 {"max_model_len", model.max_context_tokens()}};
  return {{"object", "list"}, {"data", nlohmann::ordered_json::array({std::move(card)})}};
}

nlohmann::ordered_json ReadyJson(const Readiness& ready) {
  nlohmann::ordered_json out;
  if (ready.status.ok()) {
    out = {{"status", "ready"}};
  } else {
    out = {{"status", "not ready"}, {"reason", std::string(ready.status.message())}};
  }
  if (!ready.notes.empty()) out["notes"] = ready.notes;
  return out;
}

nlohmann::ordered_json HealthJson() { return {{"status", "ok"}}; }

}  // namespace tandem
