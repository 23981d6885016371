// Parsing and validation of OpenAI request bodies (POST /v1/completions and
// /v1/chat/completions) into what the request runner takes (v1::GenerateRequest + RunOptions)
// and what the response formatter needs (OpenAiOutputOptions). Every problem is an
// InvalidArgument naming the parameter (openai_error.h: InvalidParam), like OpenAI's 400s:
// malformed JSON, unknown fields, wrong JSON types, values out of range, and parameters this
// server does not implement (n > 1, tools, echo, logit_bias, ...).
//
// Sampling ranges the runner checks as well (top_p, min_p, penalties) are checked here too so the
// error names the OpenAI parameter; prompt length against the context is the runner's.
#ifndef TANDEM_ROUTER_HTTP_OPENAI_REQUEST_H_
#define TANDEM_ROUTER_HTTP_OPENAI_REQUEST_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "router/request_runner.h"
#include "tandem/v1/generate.pb.h"

namespace tandem {

enum class OpenAiEndpoint { kCompletions, kChatCompletions };

// How the response is to be written.
struct OpenAiOutputOptions {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Completions: `logprobs` N (-1: none) → the legacy format with N alternatives per token.
  // Chat: `logprobs: true` → top_logprobs N (0 when not given); -1 when logprobs is off.
  int logprobs = -1;
  bool return_token_ids = false;  // vLLM's prompt_token_ids / token_ids
  std::string model;              // `model` as the client wrote it; "" → the served name
};

struct OpenAiRequest {
  v1::GenerateRequest request;
  RunOptions run_options;
  OpenAiOutputOptions output;
};

// Completions' default max_tokens (OpenAI's).
inline constexpr int kCompletionsDefaultMaxTokens = 16;

// `body` is the raw request body (must be a JSON object).
absl::StatusOr<OpenAiRequest> ParseCompletionsRequest(std::string_view body);
absl::StatusOr<OpenAiRequest> ParseChatCompletionsRequest(std::string_view body);
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(OpenAiEndpoint endpoint, std::string_view body);

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_OPENAI_REQUEST_H_
