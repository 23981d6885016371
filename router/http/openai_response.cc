#include "router/http/openai_response.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

using OrderedJson = nlohmann::ordered_json;

// OpenAI's stand-in for -inf (JSON has no infinities); vLLM clamps the same way.
constexpr double kMinLogprob = -9999.0;

double ClampLogprob(float lp) {
  if (std::isnan(lp)) return kMinLogprob;
  return std::max(static_cast<double>(lp), kMinLogprob);
}

// Unicode code points in UTF-8 `s` (what Python's len() counts, for text_offset).
int64_t CodePoints(std::string_view s) {
  int64_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++n;
  }
  return n;
}

OrderedJson NullIfEmpty(const std::string& s) {
  return s.empty() ? OrderedJson(nullptr) : OrderedJson(s);
}

}  // namespace

std::string DumpJson(const OrderedJson& object) {
  return object.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

std::string SseEvent(const OrderedJson& object) {
  return absl::StrCat("data: ", DumpJson(object), "\n\n");
}

OrderedJson UsageJson(const v1::Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens()},
          {"completion_tokens", usage.completion_tokens()},
          {"total_tokens", usage.prompt_tokens() + usage.completion_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens()}}}};
}

OpenAiResponseFormatter::OpenAiResponseFormatter(OpenAiOutputOptions options,
                                                 const Tokenizer& tokenizer, std::string id,
                                                 std::string model, int64_t created)
    : options_(std::move(options)),
      tokenizer_(tokenizer),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created) {}

OrderedJson OpenAiResponseFormatter::Envelope(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

std::string OpenAiResponseFormatter::TokenText(int32_t id) const {
  const TokenId ids[1] = {id};
  return tokenizer_.Decode(std::span<const TokenId>(ids, 1), /*skip_special_tokens=*/false);
}

OrderedJson OpenAiResponseFormatter::TokenBytes(int32_t id) const {
  const TokenId ids[1] = {id};
  const std::string raw = tokenizer_.DecodeBytes(std::span<const TokenId>(ids, 1), false);
  OrderedJson bytes = OrderedJson::array();
  for (char c : raw) bytes.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return bytes;
}

OrderedJson OpenAiResponseFormatter::Logprobs(const v1::GenerateResponse& response) {
  if (options_.logprobs < 0) return nullptr;
  const int top_n = options_.logprobs;
  if (is_chat()) {
    OrderedJson content = OrderedJson::array();
    for (const v1::Token& t : response.tokens()) {
      OrderedJson top = OrderedJson::array();
      for (int i = 0; i < t.top_logprobs_size() && i < top_n; ++i) {
        const v1::TokenLogprob& alt = t.top_logprobs(i);
        top.push_back({{"token", TokenText(alt.token_id())},
                       {"logprob", ClampLogprob(alt.logprob())},
                       {"bytes", TokenBytes(alt.token_id())}});
      }
      content.push_back({{"token", TokenText(t.id())},
                         {"logprob", ClampLogprob(t.logprob())},
                         {"bytes", TokenBytes(t.id())},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  // The completions API's legacy format. top_logprobs has the chosen token and the top N
  // alternatives (vLLM's and OpenAI's "N + 1"), keyed by token text.
  OrderedJson tokens = OrderedJson::array(), token_logprobs = OrderedJson::array(),
              top_logprobs = OrderedJson::array(), text_offset = OrderedJson::array();
  for (const v1::Token& t : response.tokens()) {
    std::string text = TokenText(t.id());
    const double lp = ClampLogprob(t.logprob());
    OrderedJson top = OrderedJson::object();
    top[text] = lp;
    for (int i = 0; i < t.top_logprobs_size() && i < top_n; ++i) {
      const v1::TokenLogprob& alt = t.top_logprobs(i);
      std::string alt_text = TokenText(alt.token_id());
      if (!top.contains(alt_text)) top[alt_text] = ClampLogprob(alt.logprob());
    }
    text_offset.push_back(text_offset_);
    text_offset_ += CodePoints(text);
    tokens.push_back(std::move(text));
    token_logprobs.push_back(lp);
    top_logprobs.push_back(std::move(top));
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)},
          {"text_offset", std::move(text_offset)}};
}

OrderedJson OpenAiResponseFormatter::TokenIds(const v1::GenerateResponse& response) const {
  OrderedJson ids = OrderedJson::array();
  for (const v1::Token& t : response.tokens()) ids.push_back(t.id());
  return ids;
}

OrderedJson OpenAiResponseFormatter::PromptTokenIds(const v1::GenerateResponse& response) const {
  return OrderedJson(
      std::vector<int32_t>(response.prompt_token_ids().begin(), response.prompt_token_ids().end()));
}

std::vector<OrderedJson> OpenAiResponseFormatter::StreamChunks(const v1::GenerateResponse& response) {
  std::vector<OrderedJson> chunks;
  const bool first = first_chunk_;
  first_chunk_ = false;
  const char* object = is_chat() ? "chat.completion.chunk" : "text_completion";
  auto envelope = [&] {
    OrderedJson e = Envelope(object);
    if (options_.include_usage) e["usage"] = nullptr;
    return e;
  };

  if (is_chat() && first) {
    OrderedJson role = envelope();
    role["choices"] = OrderedJson::array({{{"index", 0},
                                           {"delta", {{"role", "assistant"}, {"content", ""}}},
                                           {"logprobs", nullptr},
                                           {"finish_reason", nullptr}}});
    if (options_.return_token_ids) role["prompt_token_ids"] = PromptTokenIds(response);
    chunks.push_back(std::move(role));
  }

  if (!response.text().empty() || response.tokens_size() > 0 || !response.finish_reason().empty()) {
    OrderedJson choice = {{"index", 0}};
    if (is_chat()) {
      choice["delta"] = response.text().empty() ? OrderedJson::object()
                                                : OrderedJson{{"content", response.text()}};
    } else {
      choice["text"] = response.text();
    }
    choice["logprobs"] = response.tokens_size() > 0 ? Logprobs(response) : OrderedJson(nullptr);
    choice["finish_reason"] = NullIfEmpty(response.finish_reason());
    if (options_.return_token_ids) {
      if (!is_chat()) {
        choice["prompt_token_ids"] = first ? PromptTokenIds(response) : OrderedJson(nullptr);
      }
      choice["token_ids"] = TokenIds(response);
    }
    OrderedJson chunk = envelope();
    chunk["choices"] = OrderedJson::array({std::move(choice)});
    chunks.push_back(std::move(chunk));
  }

  if (!response.finish_reason().empty() && options_.include_usage) {
    OrderedJson usage = Envelope(object);
    usage["choices"] = OrderedJson::array();
    usage["usage"] = UsageJson(response.usage());
    chunks.push_back(std::move(usage));
  }
  return chunks;
}

void OpenAiResponseFormatter::Add(const v1::GenerateResponse& response) {
  text_ += response.text();
  for (const v1::Token& t : response.tokens()) token_ids_.push_back(t.id());
  if (response.prompt_token_ids_size() > 0) {
    prompt_token_ids_.assign(response.prompt_token_ids().begin(),
                             response.prompt_token_ids().end());
  }
  if (!response.finish_reason().empty()) finish_reason_ = response.finish_reason();
  if (response.has_usage()) {
    usage_ = response.usage();
    has_usage_ = true;
  }
  if (options_.logprobs >= 0 && response.tokens_size() > 0) {
    OrderedJson part = Logprobs(response);
    if (logprobs_.is_null()) {
      logprobs_ = std::move(part);
    } else {
      for (auto& item : part.items()) {
        for (OrderedJson& v : item.value()) logprobs_[item.key()].push_back(std::move(v));
      }
    }
  }
}

OrderedJson OpenAiResponseFormatter::Final() const {
  OrderedJson out = Envelope(is_chat() ? "chat.completion" : "text_completion");
  OrderedJson choice = {{"index", 0}};
  if (is_chat()) {
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
  } else {
    choice["text"] = text_;
  }
  OrderedJson logprobs = logprobs_;
  if (options_.logprobs >= 0 && logprobs.is_null()) {
    // Asked for, but no token was generated: empty lists rather than null.
    logprobs = is_chat() ? OrderedJson{{"content", OrderedJson::array()}}
                         : OrderedJson{{"tokens", OrderedJson::array()},
                                       {"token_logprobs", OrderedJson::array()},
                                       {"top_logprobs", OrderedJson::array()},
                                       {"text_offset", OrderedJson::array()}};
  }
  choice["logprobs"] = std::move(logprobs);
  choice["finish_reason"] = NullIfEmpty(finish_reason_);
  if (options_.return_token_ids) {
    if (is_chat()) {
      out["prompt_token_ids"] = prompt_token_ids_;
    } else {
      choice["prompt_token_ids"] = prompt_token_ids_;
    }
    choice["token_ids"] = token_ids_;
  }
  out["choices"] = OrderedJson::array({std::move(choice)});
  v1::Usage usage = usage_;
  if (!has_usage_) {
    usage.set_prompt_tokens(static_cast<int32_t>(prompt_token_ids_.size()));
    usage.set_completion_tokens(static_cast<int32_t>(token_ids_.size()));
  }
  out["usage"] = UsageJson(usage);
  return out;
}

}  // namespace tandem
