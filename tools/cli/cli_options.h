// What tandem-cli is asked to send (filled from flags in main.cc), the GenerateRequest built
// from it, and how responses are printed.
#ifndef TANDEM_TOOLS_CLI_CLI_OPTIONS_H_
#define TANDEM_TOOLS_CLI_CLI_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "tandem/v1/generate.pb.h"

namespace tandem {

struct CliOptions {
  std::string router;   // HOST:PORT
  std::string tls_ca;   // "": plaintext; else TLS verified against this CA
  std::string api_key;  // "": none
  // Exactly one prompt form.
  std::optional<std::string> prompt;  // text
  std::optional<std::string> chat;    // one user message, chat template applied
  std::optional<std::vector<int32_t>> token_ids;
  std::string model;  // "": the served model
  std::string request_id;
  // Sampling; unset: the server's default.
  std::optional<int32_t> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  std::optional<int32_t> logprobs;
  // Output: one JSON line per response instead of streamed text.
  bool json = false;
  double timeout_s = 0;  // 0: no deadline
};

// "1,2,3" → {1, 2, 3}. InvalidArgument on anything but comma-separated non-negative integers.
absl::StatusOr<std::vector<int32_t>> ParseTokenIdList(std::string_view text);

// "" when the options make a request, else one message naming the flag.
std::string ValidateCliOptions(const CliOptions& options);

v1::GenerateRequest BuildGenerateRequest(const CliOptions& options);

// One response as a single line of JSON (proto field names), without the newline.
std::string ResponseToJsonLine(const v1::GenerateResponse& response);

}  // namespace tandem

#endif  // TANDEM_TOOLS_CLI_CLI_OPTIONS_H_
