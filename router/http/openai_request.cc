#include "router/http/openai_request.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/sampling/sampling_params.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"
#include "router/http/json_fields.h"
#include "router/http/openai_error.h"
#include "router/http/openai_messages.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

using json = nlohmann::json;

// Parameters both endpoints accept (OpenAI's shared ones and vLLM's extensions).
constexpr const char* kCommonParams[] = {
    "model",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "n",
    "stream",
    "stream_options",
    "logprobs",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "user",
    "seed",
    "top_k",
    "min_p",
    "repetition_penalty",
    "ignore_eos",
    "skip_special_tokens",
    "include_stop_str_in_output",
    "add_special_tokens",
    "stop_token_ids",
    "return_token_ids",
};
constexpr const char* kCompletionsParams[] = {"prompt", "suffix", "echo", "best_of"};
constexpr const char* kChatParams[] = {
    "messages",    "top_logprobs",        "response_format", "tools",
    "tool_choice", "parallel_tool_calls", "functions",       "function_call",
};

absl::StatusOr<json> ParseBody(std::string_view body) {
  // The last object key the parser read: a number that overflows a double is reported by name.
  std::string last_key;
  auto track_keys = [&last_key](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && parsed.is_string()) {
      last_key = parsed.get<std::string>();
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(body.begin(), body.end(), track_keys);
  } catch (const json::parse_error& e) {
    // Invalid UTF-8 in a string lands here too. The parser's own text stays in the log.
    return InvalidParam("",
                        absl::StrCat("the request body is not valid JSON (at byte ", e.byte, ")"));
  } catch (const json::out_of_range&) {
    // A number beyond a double's range (1e400): nlohmann throws instead of returning infinity.
    return InvalidParam(last_key, last_key.empty()
                                      ? std::string("a number in the request body is out of range")
                                      : absl::StrCat(last_key, " is out of range"));
  } catch (const json::exception&) {
    return InvalidParam("", "the request body could not be parsed as JSON");
  }
  if (!doc.is_object()) {
    return InvalidParam(
        "", absl::StrCat("the request body must be a JSON object, got ", JsonTypeName(doc)));
  }
  return doc;
}

absl::Status CheckKnownParams(const json& doc, OpenAiEndpoint endpoint) {
  absl::flat_hash_set<std::string> known;
  for (const char* k : kCommonParams) known.insert(k);
  if (endpoint == OpenAiEndpoint::kCompletions) {
    for (const char* k : kCompletionsParams) known.insert(k);
  } else {
    for (const char* k : kChatParams) known.insert(k);
  }
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (!known.contains(it.key())) {
      return InvalidParam(it.key(),
                          absl::StrCat("Unrecognized request argument supplied: ", it.key()));
    }
  }
  return absl::OkStatus();
}

// Parameters whose only supported value is "off": reject the others by name.
absl::Status CheckUnsupported(const json& doc, OpenAiEndpoint endpoint) {
  ASSIGN_OR_RETURN(std::optional<int64_t> n, OptInt(doc, "n", 1, 1'000'000));
  if (n.has_value() && *n > 1) {
    return UnsupportedParam("n", "n > 1 is not supported: one choice per request");
  }
  if (const json* v = FindField(doc, "logit_bias")) {
    if (!v->is_object()) return WrongType("logit_bias", "an object", *v);
    if (!v->empty()) return UnsupportedParam("logit_bias", "logit_bias is not supported");
  }
  if (endpoint == OpenAiEndpoint::kCompletions) {
    ASSIGN_OR_RETURN(std::optional<int64_t> best_of, OptInt(doc, "best_of", 1, 1'000'000));
    if (best_of.has_value() && *best_of > 1) {
      return UnsupportedParam("best_of", "best_of > 1 is not supported");
    }
    ASSIGN_OR_RETURN(std::optional<bool> echo, OptBool(doc, "echo"));
    if (echo.value_or(false)) {
      return UnsupportedParam("echo", "echo is not supported: the prompt is not returned");
    }
    ASSIGN_OR_RETURN(std::optional<std::string> suffix, OptString(doc, "suffix"));
    if (suffix.has_value() && !suffix->empty()) {
      return UnsupportedParam("suffix", "suffix is not supported");
    }
    return absl::OkStatus();
  }
  for (const char* list : {"tools", "functions"}) {
    if (const json* v = FindField(doc, list)) {
      if (!v->is_array()) return WrongType(list, "an array", *v);
      if (!v->empty()) {
        return UnsupportedParam(list, absl::StrCat(list, " (tool calling) is not supported"));
      }
    }
  }
  for (const char* choice : {"tool_choice", "function_call"}) {
    if (const json* v = FindField(doc, choice)) {
      if (!(v->is_string() && v->get<std::string>() == "none")) {
        return UnsupportedParam(choice, absl::StrCat(choice,
                                                     " is not supported (tool calling); only "
                                                     "\"none\" is accepted"));
      }
    }
  }
  ASSIGN_OR_RETURN(std::optional<bool> parallel, OptBool(doc, "parallel_tool_calls"));
  (void)parallel;  // meaningless without tools
  if (const json* v = FindField(doc, "response_format")) {
    if (!v->is_object()) return WrongType("response_format", "an object", *v);
    const json* type = FindField(*v, "type");
    if (type == nullptr || !type->is_string()) {
      return InvalidParam("response_format.type", "response_format.type must be a string");
    }
    const std::string t = type->get<std::string>();
    if (t == "json_object" || t == "json_schema") {
      return UnsupportedParam(
          "response_format",
          absl::StrCat("response_format \"", t, "\" is not supported; only \"text\" is"));
    }
    if (t != "text") {
      return InvalidParam("response_format.type",
                          absl::StrCat("response_format.type \"", t,
                                       "\" is not one of text, json_object, json_schema"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseStop(const json& doc, v1::GenerateRequest& out) {
  const json* v = FindField(doc, "stop");
  if (v == nullptr) return absl::OkStatus();
  auto add = [&](const json& s, const std::string& param) -> absl::Status {
    if (!s.is_string()) return WrongType(param, "a string", s);
    if (s.get_ref<const std::string&>().empty()) {
      return InvalidParam(param, absl::StrCat(param, " is an empty string"));
    }
    out.add_stop(s.get<std::string>());
    return absl::OkStatus();
  };
  if (v->is_string()) return add(*v, "stop");
  if (!v->is_array()) return WrongType("stop", "a string or an array of strings", *v);
  for (size_t i = 0; i < v->size(); ++i) {
    RETURN_IF_ERROR(add((*v)[i], absl::StrCat("stop[", i, "]")));
  }
  return absl::OkStatus();
}

absl::Status ParseTokenIds(const json& arr, const std::string& param, v1::TokenIds* out) {
  for (size_t i = 0; i < arr.size(); ++i) {
    ASSIGN_OR_RETURN(int64_t id, IntValue(absl::StrCat(param, "[", i, "]"), arr[i], 0,
                                          std::numeric_limits<int32_t>::max()));
    out->add_ids(static_cast<int32_t>(id));
  }
  return absl::OkStatus();
}

// Sampling, stop and output options shared by both endpoints.
absl::Status ParseCommon(const json& doc, OpenAiEndpoint endpoint, OpenAiRequest& out) {
  v1::GenerateRequest& req = out.request;
  v1::SamplingParams& s = *req.mutable_sampling();
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

  ASSIGN_OR_RETURN(std::optional<std::string> model, OptString(doc, "model"));
  if (model.has_value()) {
    req.set_model(*model);
    out.output.model = *model;
  }

  ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, OptInt(doc, "max_tokens", 1, kInt32Max));
  ASSIGN_OR_RETURN(std::optional<int64_t> max_completion_tokens,
                   OptInt(doc, "max_completion_tokens", 1, kInt32Max));
  if (max_tokens.has_value() && max_completion_tokens.has_value() &&
      *max_tokens != *max_completion_tokens) {
    return InvalidParam("max_completion_tokens",
                        absl::StrCat("max_tokens (", *max_tokens, ") and max_completion_tokens (",
                                     *max_completion_tokens, ") disagree; give one of them"));
  }
  if (max_completion_tokens.has_value()) max_tokens = max_completion_tokens;
  if (max_tokens.has_value()) {
    s.set_max_tokens(static_cast<int32_t>(*max_tokens));
  } else if (endpoint == OpenAiEndpoint::kCompletions) {
    s.set_max_tokens(kCompletionsDefaultMaxTokens);
  } else {
    out.run_options.unset_max_tokens_fills_context = true;
  }

  ASSIGN_OR_RETURN(std::optional<double> temperature, OptNumber(doc, "temperature"));
  if (temperature.has_value()) {
    if (!(*temperature >= 0.0) || !std::isfinite(*temperature)) {
      return InvalidParam("temperature",
                          absl::StrCat("temperature must be >= 0, got ", *temperature));
    }
    s.set_temperature(static_cast<float>(*temperature));
  }
  ASSIGN_OR_RETURN(std::optional<double> top_p, OptNumber(doc, "top_p"));
  if (top_p.has_value()) {
    if (!(*top_p > 0.0 && *top_p <= 1.0)) {
      return InvalidParam("top_p", absl::StrCat("top_p must be in (0, 1], got ", *top_p));
    }
    s.set_top_p(static_cast<float>(*top_p));
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> top_k, OptInt(doc, "top_k", -1, kInt32Max));
  if (top_k.has_value()) s.set_top_k(static_cast<int32_t>(*top_k));
  ASSIGN_OR_RETURN(std::optional<double> min_p, OptNumber(doc, "min_p"));
  if (min_p.has_value()) {
    if (!(*min_p >= 0.0 && *min_p <= 1.0)) {
      return InvalidParam("min_p", absl::StrCat("min_p must be in [0, 1], got ", *min_p));
    }
    s.set_min_p(static_cast<float>(*min_p));
  }
  for (const char* penalty : {"presence_penalty", "frequency_penalty"}) {
    ASSIGN_OR_RETURN(std::optional<double> p, OptNumber(doc, penalty));
    if (!p.has_value()) continue;
    if (!(*p >= -2.0 && *p <= 2.0)) {
      return InvalidParam(penalty, absl::StrCat(penalty, " must be in [-2, 2], got ", *p));
    }
    if (std::string_view(penalty) == "presence_penalty") {
      s.set_presence_penalty(static_cast<float>(*p));
    } else {
      s.set_frequency_penalty(static_cast<float>(*p));
    }
  }
  ASSIGN_OR_RETURN(std::optional<double> repetition, OptNumber(doc, "repetition_penalty"));
  if (repetition.has_value()) {
    if (!(*repetition > 0.0) || !std::isfinite(*repetition)) {
      return InvalidParam("repetition_penalty",
                          absl::StrCat("repetition_penalty must be > 0, got ", *repetition));
    }
    s.set_repetition_penalty(static_cast<float>(*repetition));
  }
  if (const json* seed = FindField(doc, "seed")) {
    if (seed->is_number_unsigned()) {
      s.set_seed(seed->get<uint64_t>());
    } else {
      // Negative seeds are valid in OpenAI's API: the same int64 maps to the same uint64.
      ASSIGN_OR_RETURN(int64_t value, IntValue("seed", *seed, std::numeric_limits<int64_t>::min(),
                                               std::numeric_limits<int64_t>::max()));
      s.set_seed(static_cast<uint64_t>(value));
    }
  }
  RETURN_IF_ERROR(ParseStop(doc, req));
  if (const json* ids = FindField(doc, "stop_token_ids")) {
    if (!ids->is_array()) return WrongType("stop_token_ids", "an array of integers", *ids);
    v1::TokenIds parsed;
    RETURN_IF_ERROR(ParseTokenIds(*ids, "stop_token_ids", &parsed));
    s.mutable_stop_token_ids()->Assign(parsed.ids().begin(), parsed.ids().end());
  }
  ASSIGN_OR_RETURN(std::optional<bool> ignore_eos, OptBool(doc, "ignore_eos"));
  if (ignore_eos.has_value()) s.set_ignore_eos(*ignore_eos);
  ASSIGN_OR_RETURN(std::optional<bool> skip_special, OptBool(doc, "skip_special_tokens"));
  if (skip_special.has_value()) req.set_skip_special_tokens(*skip_special);
  ASSIGN_OR_RETURN(std::optional<bool> include_stop, OptBool(doc, "include_stop_str_in_output"));
  if (include_stop.has_value()) req.set_include_stop_str_in_output(*include_stop);
  ASSIGN_OR_RETURN(std::optional<bool> add_special, OptBool(doc, "add_special_tokens"));
  if (add_special.has_value()) {
    if (endpoint == OpenAiEndpoint::kChatCompletions && *add_special) {
      // The chat template writes the special tokens (BOS) itself.
      return UnsupportedParam("add_special_tokens",
                              "add_special_tokens=true is not supported for chat: the chat "
                              "template writes the special tokens");
    }
    req.set_add_special_tokens(*add_special);
  }
  ASSIGN_OR_RETURN(std::optional<bool> return_ids, OptBool(doc, "return_token_ids"));
  out.output.return_token_ids = return_ids.value_or(false);
  ASSIGN_OR_RETURN(std::optional<std::string> user, OptString(doc, "user"));
  (void)user;  // accepted; OpenAI uses it for abuse monitoring

  ASSIGN_OR_RETURN(std::optional<bool> stream, OptBool(doc, "stream"));
  out.output.stream = stream.value_or(false);
  if (const json* opts = FindField(doc, "stream_options")) {
    if (!out.output.stream) {
      return InvalidParam("stream_options", "stream_options is only allowed when stream is true");
    }
    if (!opts->is_object()) return WrongType("stream_options", "an object", *opts);
    for (auto it = opts->begin(); it != opts->end(); ++it) {
      if (it.key() != "include_usage" && it.key() != "continuous_usage_stats") {
        return InvalidParam(
            absl::StrCat("stream_options.", it.key()),
            absl::StrCat("Unrecognized request argument supplied: stream_options.", it.key()));
      }
    }
    for (const char* flag : {"include_usage", "continuous_usage_stats"}) {
      const json* v = FindField(*opts, flag);
      if (v != nullptr && !v->is_boolean()) {
        return WrongType(absl::StrCat("stream_options.", flag), "a boolean", *v);
      }
    }
    const json* include_usage = FindField(*opts, "include_usage");
    out.output.include_usage = include_usage != nullptr && include_usage->get<bool>();
    const json* continuous = FindField(*opts, "continuous_usage_stats");
    if (continuous != nullptr && continuous->get<bool>()) {
      return UnsupportedParam("stream_options.continuous_usage_stats",
                              "stream_options.continuous_usage_stats is not supported");
    }
  }
  return absl::OkStatus();
}

absl::Status ParsePrompt(const json& doc, v1::GenerateRequest& req) {
  auto it = doc.find("prompt");
  if (it == doc.end() || it->is_null()) return InvalidParam("prompt", "prompt is required");
  const json& p = *it;
  auto set_text = [&](const json& s) -> absl::Status {
    if (s.get_ref<const std::string&>().empty()) {
      return InvalidParam("prompt", "prompt is an empty string");
    }
    req.set_text(s.get<std::string>());
    return absl::OkStatus();
  };
  if (p.is_string()) return set_text(p);
  if (!p.is_array()) {
    return WrongType("prompt", "a string, an array of token ids or an array with one prompt", p);
  }
  if (p.empty()) return InvalidParam("prompt", "prompt is an empty array");
  if (p[0].is_number()) return ParseTokenIds(p, "prompt", req.mutable_token_ids());
  if (p.size() > 1) {
    return UnsupportedParam("prompt", absl::StrCat("only one prompt per request; got ", p.size()));
  }
  // A batch of one: ["text"] or [[ids]].
  if (p[0].is_string()) return set_text(p[0]);
  if (p[0].is_array()) {
    if (p[0].empty()) return InvalidParam("prompt[0]", "prompt[0] is an empty array");
    return ParseTokenIds(p[0], "prompt[0]", req.mutable_token_ids());
  }
  return WrongType("prompt[0]", "a string or an array of token ids", p[0]);
}

absl::Status ParseLogprobs(const json& doc, OpenAiEndpoint endpoint, OpenAiRequest& out) {
  if (endpoint == OpenAiEndpoint::kCompletions) {
    ASSIGN_OR_RETURN(std::optional<int64_t> n, OptInt(doc, "logprobs", 0, kMaxLogprobs));
    if (n.has_value()) out.output.logprobs = static_cast<int>(*n);
  } else {
    ASSIGN_OR_RETURN(std::optional<bool> on, OptBool(doc, "logprobs"));
    ASSIGN_OR_RETURN(std::optional<int64_t> top, OptInt(doc, "top_logprobs", 0, kMaxLogprobs));
    if (top.has_value() && !on.value_or(false)) {
      return InvalidParam("top_logprobs", "top_logprobs requires logprobs: true");
    }
    if (on.value_or(false)) out.output.logprobs = static_cast<int>(top.value_or(0));
  }
  if (out.output.logprobs >= 0) out.request.mutable_sampling()->set_logprobs(out.output.logprobs);
  return absl::OkStatus();
}

absl::StatusOr<OpenAiRequest> ParseRequestFields(OpenAiEndpoint endpoint, std::string_view body) {
  ASSIGN_OR_RETURN(json doc, ParseBody(body));
  RETURN_IF_ERROR(CheckKnownParams(doc, endpoint));
  OpenAiRequest out;
  out.output.endpoint = endpoint;
  out.run_options.api = endpoint == OpenAiEndpoint::kCompletions ? RequestApi::kCompletions
                                                                 : RequestApi::kChatCompletions;
  if (endpoint == OpenAiEndpoint::kCompletions) {
    RETURN_IF_ERROR(ParsePrompt(doc, out.request));
  } else {
    RETURN_IF_ERROR(ParseChatMessages(doc, out.request));
  }
  RETURN_IF_ERROR(CheckUnsupported(doc, endpoint));
  RETURN_IF_ERROR(ParseCommon(doc, endpoint, out));
  RETURN_IF_ERROR(ParseLogprobs(doc, endpoint, out));
  return out;
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body) {
  // Every field is type-checked before it is read; this is the net under that rule, so no
  // request can take the router down (an exception escaping a request thread aborts it).
  try {
    return ParseRequestFields(endpoint, body);
  } catch (const std::exception& e) {
    spdlog::warn("HTTP request parsing threw: {}", e.what());
    return InvalidParam("", "the request body could not be parsed");
  }
}

absl::StatusOr<OpenAiRequest> ParseCompletionsRequest(std::string_view body) {
  return ParseOpenAiRequest(OpenAiEndpoint::kCompletions, body);
}

absl::StatusOr<OpenAiRequest> ParseChatCompletionsRequest(std::string_view body) {
  return ParseOpenAiRequest(OpenAiEndpoint::kChatCompletions, body);
}

}  // namespace tandem
