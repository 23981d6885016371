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

constexpr char kIntro[] =
    R"(Usage: tandem-cli --router HOST:PORT (--prompt TEXT | --chat TEXT | --token-ids A,B,...) [options]

Sends one request to a tandem router's gRPC Generate API and prints the text as it streams,
then a newline. Exits non-zero with the server's status message on an error.
)";

// Declares every flag against `o` with its --help line.
void AddCliFlags(tandem::FlagSet& flags, CliOptions* o) {
  flags.Section("Prompt (exactly one)");
  flags.String("prompt", &o->prompt,
               {"TEXT", "a text prompt (the tokenizer adds its special tokens)"});
  flags.String("chat", &o->chat,
               {"TEXT", "one user message, rendered with the model's chat template"});
  flags.Custom("token-ids", {"A,B,...", "a pre-tokenized prompt"},
               [o](std::string_view value) -> std::string {
                 absl::StatusOr<std::vector<int32_t>> ids = tandem::ParseTokenIdList(value);
                 if (!ids.ok()) return std::string(ids.status().message());
                 o->token_ids = *std::move(ids);
                 return "";
               });
  flags.Section("Sampling (unset: the server's defaults)");
  flags.Number("max-tokens", &o->max_tokens, {"N", "tokens to generate"});
  flags.Number("temperature", &o->temperature, {"T", "0 = greedy"});
  flags.Number("top-p", &o->top_p,
               {"P", "sample from the smallest set of tokens whose probability reaches P"});
  flags.Number("top-k", &o->top_k, {"K", "sample from the K most likely tokens"});
  flags.Number("seed", &o->seed, {"S", "random seed: same seed, same output"});
  flags.Custom("stop", {"STR", "stop string (repeatable)"},
               [o](std::string_view value) -> std::string {
                 o->stop.emplace_back(value);
                 return "";
               });
  flags.Switch("ignore-eos", &o->ignore_eos, "keep going past EOS");
  flags.Number("logprobs", &o->logprobs,
               {"N", "chosen token's logprob plus the top N (0..20), shown with --json"});
  flags.Section("Other");
  flags.String("router", &o->router, {"HOST:PORT", "the router's gRPC address (required)"});
  flags.String("tls-ca", &o->tls_ca,
               {"PATH", "connect over TLS, verifying the router against this CA (PEM)"});
  flags.String("api-key", &o->api_key,
               {"KEY", "send \"authorization: Bearer KEY\" (a router started with --api-key)"});
  flags.String("model", &o->model,
               {"NAME", "must name the served model (default: the served model)"});
  flags.String("request-id", &o->request_id, {"ID", "echoed back by the router"});
  flags.Switch("json", &o->json, "print each response message as one JSON line instead of text");
  flags.Number("timeout-s", &o->timeout_s, {"S", "deadline for the whole call (default: none)"});
}

}  // namespace

int main(int argc, char** argv) {
  CliOptions options;
  tandem::FlagSet flags;
  AddCliFlags(flags, &options);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty()) error = tandem::ValidateCliOptions(options);
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
