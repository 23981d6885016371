// A minimal tokenizer.json + tokenizer_config.json pair (303 tokens) for fast make-model tests.
#ifndef TANDEM_TESTS_TOOLS_MAKE_MODEL_FAKE_TOKENIZER_H_
#define TANDEM_TESTS_TOOLS_MAKE_MODEL_FAKE_TOKENIZER_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/common/model/test_model_dir.h"

namespace tandem::testing {

inline constexpr int kFakeVocab = 303;  // 300 BPE tokens + <s> (300), </s> (301), <|eot_id|> (302)

// Writes DIR/tokenizer.json and DIR/tokenizer_config.json.
inline void WriteFakeTokenizer(const std::string& dir) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int i = 0; i < 300; ++i) vocab[absl::StrCat("tok", i)] = i;
  nlohmann::json added = nlohmann::json::array();
  const char* specials[] = {"<s>", "</s>", "<|eot_id|>"};
  for (int i = 0; i < 3; ++i) {
    added.push_back({{"id", 300 + i}, {"content", specials[i]}, {"special", true}});
  }
  nlohmann::json tok = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  WriteFile(dir + "/tokenizer.json", tok.dump());
  // bos as an AddedToken object, eos as a plain string: both spellings occur in the wild.
  nlohmann::json cfg = {{"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
                        {"eos_token", "</s>"},
                        {"tokenizer_class", "PreTrainedTokenizerFast"}};
  WriteFile(dir + "/tokenizer_config.json", cfg.dump());
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_TOOLS_MAKE_MODEL_FAKE_TOKENIZER_H_
