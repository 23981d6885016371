#include "router/http/http_routes.h"

#include <cctype>

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

bool AuthorizedBearer(std::string_view authorization, std::string_view api_key) {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return false;
  }
  std::string_view key = authorization.substr(kScheme.size());
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
  // Every byte of the expected key is compared, whatever the first difference.
  unsigned char diff = key.size() == api_key.size() ? 0 : 1;
  for (size_t i = 0; i < api_key.size(); ++i) {
    const unsigned char got = i < key.size() ? static_cast<unsigned char>(key[i]) : 0;
    diff |= got ^ static_cast<unsigned char>(api_key[i]);
  }
  return diff == 0;
}

nlohmann::ordered_json ModelsJson(const ServedModel& model, int64_t created) {
  nlohmann::ordered_json card = {{"id", model.name},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "tandem"},
                                 {"max_model_len", model.max_context_tokens()}};
  return {{"object", "list"}, {"data", nlohmann::ordered_json::array({std::move(card)})}};
}

nlohmann::ordered_json ReadyJson(const absl::Status& ready) {
  if (ready.ok()) return {{"status", "ready"}};
  return {{"status", "not ready"}, {"reason", std::string(ready.message())}};
}

nlohmann::ordered_json HealthJson() { return {{"status", "ok"}}; }

}  // namespace tandem
