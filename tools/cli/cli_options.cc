#include "tools/cli/cli_options.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/util/cli_flags.h"
#include "google/protobuf/util/json_util.h"

namespace tandem {

absl::StatusOr<std::vector<int32_t>> ParseTokenIdList(std::string_view text) {
  std::vector<int32_t> ids;
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), text.size()), ',')) {
    part = absl::StripAsciiWhitespace(part);
    int32_t id = 0;
    if (!ParseFlagNumber(std::string_view(part.data(), part.size()), &id) || id < 0) {
      return absl::InvalidArgumentError("expects comma-separated non-negative token ids");
    }
    ids.push_back(id);
  }
  return ids;
}

std::string ValidateCliOptions(const CliOptions& options) {
  if (options.router.empty()) return "--router HOST:PORT is required";
  if (options.router.find(':') == std::string::npos) {
    return absl::StrCat("--router expects HOST:PORT, got '", options.router, "'");
  }
  int prompts =
      options.prompt.has_value() + options.chat.has_value() + options.token_ids.has_value();
  if (prompts != 1) return "give exactly one of --prompt TEXT, --chat TEXT and --token-ids IDS";
  if (options.max_tokens.has_value() && *options.max_tokens < 1) {
    return "--max-tokens must be >= 1";
  }
  if (options.temperature.has_value() && *options.temperature < 0) {
    return "--temperature must be >= 0";
  }
  if (options.top_p.has_value() && (*options.top_p <= 0 || *options.top_p > 1)) {
    return "--top-p must be in (0, 1]";
  }
  if (options.logprobs.has_value() && (*options.logprobs < 0 || *options.logprobs > 20)) {
    return "--logprobs must be between 0 and 20";
  }
  for (const std::string& s : options.stop) {
    if (s.empty()) return "--stop needs a non-empty string";
  }
  if (options.timeout_s < 0) return "--timeout-s must be >= 0";
  return "";
}

v1::GenerateRequest BuildGenerateRequest(const CliOptions& options) {
  v1::GenerateRequest request;
  request.set_model(options.model);
  request.set_request_id(options.request_id);
  if (options.prompt.has_value()) {
    request.set_text(*options.prompt);
  } else if (options.chat.has_value()) {
    v1::ChatMessage* message = request.mutable_chat()->add_messages();
    message->set_role("user");
    message->set_content(*options.chat);
  } else if (options.token_ids.has_value()) {
    v1::TokenIds* ids = request.mutable_token_ids();
    for (int32_t id : *options.token_ids) ids->add_ids(id);
  }
  v1::SamplingParams* sampling = request.mutable_sampling();
  if (options.max_tokens.has_value()) sampling->set_max_tokens(*options.max_tokens);
  if (options.temperature.has_value()) sampling->set_temperature(*options.temperature);
  if (options.top_p.has_value()) sampling->set_top_p(*options.top_p);
  if (options.top_k.has_value()) sampling->set_top_k(*options.top_k);
  if (options.seed.has_value()) sampling->set_seed(*options.seed);
  if (options.logprobs.has_value()) sampling->set_logprobs(*options.logprobs);
  sampling->set_ignore_eos(options.ignore_eos);
  for (const std::string& s : options.stop) request.add_stop(s);
  return request;
}

std::string ResponseToJsonLine(const v1::GenerateResponse& response) {
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  std::string line;
  // Serializing a well-formed message cannot fail.
  (void)google::protobuf::util::MessageToJsonString(response, &line, print);
  return line;
}

}  // namespace tandem
