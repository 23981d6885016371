// tokenizer_config.json of a Hugging Face model directory: special tokens, BOS/EOS flags and
// chat templates (a string, or a list of {name, template}; chat_template.jinja and
// chat_template.json next to it are read when the config has none).
#ifndef TANDEM_COMMON_TOKENIZER_TOKENIZER_CONFIG_H_
#define TANDEM_COMMON_TOKENIZER_TOKENIZER_CONFIG_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tandem {

struct TokenizerConfig {
  // Token strings; AddedToken objects ({"content": ...}) are reduced to their content.
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  // As written in the config. Note: transformers' LlamaTokenizerFast rebuilds the
  // tokenizer.json post-processor from these flags; Tokenizer::Encode follows tokenizer.json
  // only, so a caller that needs that behaviour must add BOS/EOS itself.
  std::optional<bool> add_bos_token, add_eos_token;
  bool clean_up_tokenization_spaces = false;
  std::string tokenizer_class;
  // The default chat template ("" if the model has none) and all named ones.
  std::string chat_template;
  std::map<std::string, std::string> named_chat_templates;
};

// Parses tokenizer_config.json contents; `path` names the file in errors.
absl::StatusOr<TokenizerConfig> ParseTokenizerConfig(std::string_view json,
                                                     const std::string& path);

// Reads `model_dir`/tokenizer_config.json (plus chat_template.jinja / chat_template.json).
absl::StatusOr<TokenizerConfig> LoadTokenizerConfig(const std::string& model_dir);

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_TOKENIZER_CONFIG_H_
