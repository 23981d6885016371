// The OpenAI JSON objects of one request's output, built from the request runner's
// v1::GenerateResponse stream: streamed chunks (`text_completion` / `chat.completion.chunk`,
// the chat role chunk first, the stream_options.include_usage chunk last) or, for a
// non-streaming request, the whole `text_completion` / `chat.completion` object. Logprobs come
// in the completions API's legacy format (tokens, token_logprobs, top_logprobs dicts,
// text_offset) or the chat format (content[] with token, logprob, bytes, top_logprobs); token
// strings are each token id decoded alone with the served model's tokenizer. vLLM's
// return_token_ids adds prompt_token_ids and token_ids.
#ifndef TANDEM_ROUTER_HTTP_OPENAI_RESPONSE_H_
#define TANDEM_ROUTER_HTTP_OPENAI_RESPONSE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "router/http/openai_request.h"
#include "tandem/v1/generate.pb.h"

namespace tandem {

// One server-sent event carrying `object`: "data: <json>\n\n".
std::string SseEvent(const nlohmann::ordered_json& object);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// JSON text for the wire: invalid UTF-8 (never expected) is replaced rather than thrown on.
std::string DumpJson(const nlohmann::ordered_json& object);

// The usage object: prompt, completion and total tokens, prompt_tokens_details.cached_tokens.
nlohmann::ordered_json UsageJson(const v1::Usage& usage);

// Not thread-safe: one request's thread uses it.
class OpenAiResponseFormatter {
 public:
  // `id` is the response id ("cmpl-…" / "chatcmpl-…"); `model` the name to report; `created`
  // unix seconds. `tokenizer` must outlive the formatter.
  OpenAiResponseFormatter(OpenAiOutputOptions options, const Tokenizer& tokenizer, std::string id,
                          std::string model, int64_t created);

  // Streaming: the chunks `response` becomes, in order (none for a response with no text, no
  // tokens and no finish_reason). The chat stream's first chunk carries the assistant role; the
  // last response is followed by the usage chunk when include_usage was asked for.
  std::vector<nlohmann::ordered_json> StreamChunks(const v1::GenerateResponse& response);

  // Non-streaming: collects `response` for Final().
  void Add(const v1::GenerateResponse& response);
  // The whole response object of everything Add()ed.
  nlohmann::ordered_json Final() const;

  const std::string& id() const { return id_; }

 private:
  // Skeleton of every object: id, object, created, model.
  nlohmann::ordered_json Envelope(const char* object) const;
  // Logprobs of `response`'s tokens in the endpoint's format; null when not asked for.
  nlohmann::ordered_json Logprobs(const v1::GenerateResponse& response);
  nlohmann::ordered_json TokenIds(const v1::GenerateResponse& response) const;
  nlohmann::ordered_json PromptTokenIds(const v1::GenerateResponse& response) const;
  std::string TokenText(int32_t id) const;
  nlohmann::ordered_json TokenBytes(int32_t id) const;
  bool is_chat() const { return options_.endpoint == OpenAiEndpoint::kChatCompletions; }

  const OpenAiOutputOptions options_;
  const Tokenizer& tokenizer_;
  const std::string id_;
  const std::string model_;
  const int64_t created_;

  bool first_chunk_ = true;
  // Completions logprobs: where the next token starts in the output text (code points).
  int64_t text_offset_ = 0;

  // Non-streaming accumulation.
  std::string text_;
  std::vector<int32_t> token_ids_;
  std::vector<int32_t> prompt_token_ids_;
  std::string finish_reason_;
  v1::Usage usage_;
  bool has_usage_ = false;
  nlohmann::ordered_json logprobs_;  // null, or the merged logprobs object
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_OPENAI_RESPONSE_H_
