// What tandem-make-model needs from a Hugging Face tokenizer: the vocabulary size and the ids of
// the special tokens that config.json names. Read straight from the JSON files (no tokenizer).
#ifndef TANDEM_TOOLS_MAKE_MODEL_TOKENIZER_INFO_H_
#define TANDEM_TOOLS_MAKE_MODEL_TOKENIZER_INFO_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace tandem {

struct TokenizerInfo {
  int vocab_size = 0;     // highest token id + 1 (model vocabulary and added tokens)
  int bos_token_id = -1;  // tokenizer_config.json's bos_token; -1 when it has none
  int eos_token_id = -1;  // tokenizer_config.json's eos_token; -1 when it has none
  std::map<std::string, int> added_tokens;  // content -> id, from tokenizer.json's added_tokens
};

// Reads tokenizer.json (model.vocab, added_tokens) and tokenizer_config.json (bos_token,
// eos_token: a string, an {"content": ...} object, or null). Errors name the file and field.
absl::StatusOr<TokenizerInfo> ReadTokenizerInfo(const std::string& tokenizer_json_path,
                                                const std::string& tokenizer_config_path);

}  // namespace tandem

#endif  // TANDEM_TOOLS_MAKE_MODEL_TOKENIZER_INFO_H_
