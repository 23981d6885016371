// tandem-cli: sends one Generate request to a tandem router and streams the answer.
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/cli_flags.h"
#include "tools/cli/cli_options.h"
#include "tools/cli/generate_client.h"

namespace {

using tandem::CliOptions;

constexpr char kUsage[] =
    R"(Usage: tandem-cli --router HOST:PORT (--prompt TEXT | --chat TEXT | --token-ids A,B,...) [options]

Sends one request to a tandem router's gRPC Generate API and prints the text as it streams,
then a newline. Exits non-zero with the server's status message on an error.

Prompt (exactly one):
  --prompt TEXT           a text prompt (the tokenizer adds its special tokens)
  --chat TEXT             one user message, rendered with the model's chat template
  --token-ids A,B,...     a pre-tokenized prompt
Sampling (unset: the server's defaults):
  --max-tokens N          tokens to generate
  --temperature T         0 = greedy
  --top-p P  --top-k K  --seed S
  --stop STR              stop string (repeatable)
  --ignore-eos            keep going past EOS
  --logprobs N            chosen token's logprob plus the top N (0..20), shown with --json
Other:
  --router HOST:PORT      the router's gRPC address (required)
  --tls-ca PATH           connect over TLS, verifying the router against this CA (PEM)
  --api-key KEY           send "authorization: Bearer KEY" (a router started with --api-key)
  --model NAME            must name the served model (default: the served model)
  --request-id ID         echoed back by the router
  --json                  print each response message as one JSON line instead of text
  --timeout-s S           deadline for the whole call (default: none)
  --help                  this text
)";

std::string ParseFlags(int argc, char** argv, CliOptions* o, bool* help) {
  tandem::FlagSet flags;
  flags.String("router", &o->router);
  flags.String("tls-ca", &o->tls_ca);
  flags.String("api-key", &o->api_key);
  flags.String("prompt", &o->prompt);
  flags.String("chat", &o->chat);
  flags.Custom("token-ids", [o](std::string_view value) -> std::string {
    absl::StatusOr<std::vector<int32_t>> ids = tandem::ParseTokenIdList(value);
    if (!ids.ok()) return std::string(ids.status().message());
    o->token_ids = *std::move(ids);
    return "";
  });
  flags.String("model", &o->model);
  flags.String("request-id", &o->request_id);
  flags.Number("max-tokens", &o->max_tokens);
  flags.Number("temperature", &o->temperature);
  flags.Number("top-p", &o->top_p);
  flags.Number("top-k", &o->top_k);
  flags.Number("seed", &o->seed);
  flags.Custom("stop", [o](std::string_view value) -> std::string {
    o->stop.emplace_back(value);
    return "";
  });
  flags.Switch("ignore-eos", &o->ignore_eos);
  flags.Number("logprobs", &o->logprobs);
  flags.Switch("json", &o->json);
  flags.Number("timeout-s", &o->timeout_s);
  std::string error = flags.Parse(argc, argv, help);
  if (!error.empty() || *help) return error;
  return tandem::ValidateCliOptions(*o);
}

}  // namespace

int main(int argc, char** argv) {
  CliOptions options;
  bool help = false;
  std::string error = ParseFlags(argc, argv, &options, &help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-cli: %s\n", error.c_str());
    return 2;
  }
  tandem::GenerateClient client(options.router, options.tls_ca, options.api_key);
  bool wrote_text = false;
  absl::Status status = client.Generate(
      tandem::BuildGenerateRequest(options),
      [&](const tandem::v1::GenerateResponse& response) {
        if (options.json) {
          std::string line = tandem::ResponseToJsonLine(response) + "\n";
          std::fwrite(line.data(), 1, line.size(), stdout);
        } else if (!response.text().empty()) {
          std::fwrite(response.text().data(), 1, response.text().size(), stdout);
          wrote_text = true;
        }
        std::fflush(stdout);
      },
      options.timeout_s > 0 ? absl::Milliseconds(options.timeout_s * 1000)
                            : absl::InfiniteDuration());
  if (!options.json && (status.ok() || wrote_text)) {
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "tandem-cli: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
                 std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
