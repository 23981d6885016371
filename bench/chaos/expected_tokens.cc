#include "bench/chaos/expected_tokens.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/backend/sim/sim_backend.h"
#include "common/model/model_config.h"
#include "nlohmann/json.hpp"
#include "tools/cluster/child_process.h"

namespace tandem::chaos {

std::vector<TokenIds> MakePrompts(int n, int min_len, int max_len, int32_t id_limit,
                                  uint64_t seed) {
  constexpr int32_t kFirstId = 100;
  const int32_t span = std::max<int32_t>(id_limit - kFirstId, 1);
  uint64_t state = seed;
  auto next = [&state] {  // splitmix64
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  std::vector<TokenIds> prompts;
  for (int i = 0; i < n; ++i) {
    const int len = n == 1 ? min_len : min_len + (max_len - min_len) * i / (n - 1);
    TokenIds prompt;
    for (int t = 0; t < std::max(len, 1); ++t) {
      prompt.push_back(kFirstId + static_cast<int32_t>(next() % static_cast<uint64_t>(span)));
    }
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

absl::StatusOr<std::vector<TokenIds>> SimExpectedTokens(const std::string& model_dir,
                                                        const std::vector<TokenIds>& prompts,
                                                        int max_tokens) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(model_dir);
  if (!config.ok()) return config.status();
  SimBackendOptions options;
  options.num_kv_blocks = 4;  // only its token limit is read
  absl::StatusOr<std::unique_ptr<SimBackend>> sim = SimBackend::Create(*config, options);
  if (!sim.ok()) return sim.status();
  const int32_t limit = (*sim)->token_limit();
  std::vector<TokenIds> expected;
  for (const TokenIds& prompt : prompts) {
    TokenIds out;
    TokenId last = prompt.back();
    for (int i = 0; i < max_tokens; ++i) {
      last = SimBackend::NextToken(last, static_cast<int64_t>(prompt.size()) + i, limit);
      out.push_back(last);
    }
    expected.push_back(std::move(out));
  }
  return expected;
}

absl::StatusOr<std::vector<TokenIds>> GenerateExpectedTokens(const std::string& generate_binary,
                                                             const std::string& model_dir,
                                                             const std::vector<TokenIds>& prompts,
                                                             int max_tokens,
                                                             const std::string& work_dir,
                                                             absl::Duration timeout) {
  const std::string prompts_path = work_dir + "/prompts.jsonl";
  {
    std::ofstream out(prompts_path);
    for (const TokenIds& prompt : prompts) out << nlohmann::json(prompt).dump() << "\n";
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", prompts_path));
  }
  ChildSpec spec;
  spec.binary = generate_binary;
  spec.args = {"--model",        model_dir,
               "--prompts-file", prompts_path,
               "--max-tokens",   absl::StrCat(max_tokens),
               "--temperature",  "0",
               "--ignore-eos"};
  spec.stdout_path = work_dir + "/expected.jsonl";
  spec.stderr_path = work_dir + "/tandem-generate.log";
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(spec);
  if (!child.ok()) return child.status();
  if (!(*child)->WaitFor(timeout)) {
    (*child)->Stop(absl::ZeroDuration());
    return absl::DeadlineExceededError(
        absl::StrCat("tandem-generate took longer than ", absl::FormatDuration(timeout)));
  }
  if (!(*child)->ExitedCleanly()) {
    return absl::InternalError(absl::StrCat("tandem-generate ", (*child)->DescribeExit(), ": ",
                                            ReadFileTail(spec.stderr_path, 10)));
  }
  std::ifstream in(spec.stdout_path);
  std::vector<TokenIds> expected;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("token_ids") || !j["token_ids"].is_array()) {
      return absl::InternalError(
          absl::StrCat("tandem-generate printed an unexpected line: ", line));
    }
    expected.push_back(j["token_ids"].get<TokenIds>());
  }
  if (expected.size() != prompts.size()) {
    return absl::InternalError(absl::StrCat("tandem-generate answered ", expected.size(), " of ",
                                            prompts.size(), " prompts"));
  }
  return expected;
}

int TokenErrors(const TokenIds& want, const TokenIds& got) {
  const size_t common = std::min(want.size(), got.size());
  int errors = static_cast<int>(std::max(want.size(), got.size()) - common);
  for (size_t i = 0; i < common; ++i) errors += want[i] != got[i] ? 1 : 0;
  return errors;
}

}  // namespace tandem::chaos
