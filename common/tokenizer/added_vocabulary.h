// The "added_tokens" of tokenizer.json: tokens matched verbatim in the input before the normal
// pipeline runs (special tokens such as <|eot_id|>, and non-special ones such as <think>).
// Matching is leftmost-longest, like Hugging Face's Aho-Corasick matcher, and honours the
// single_word, lstrip, rstrip and normalized flags.
#ifndef TANDEM_COMMON_TOKENIZER_ADDED_VOCABULARY_H_
#define TANDEM_COMMON_TOKENIZER_ADDED_VOCABULARY_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/tokenizer/unicode/str_util.h"
#include "common/types/dtype.h"

namespace tandem {

struct AddedToken {
  TokenId id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  // Matched in the normalized text (true) or in the raw input (false).
  bool normalized = false;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  explicit AddedVocabulary(std::vector<AddedToken> tokens);

  // A piece of text: either an added token (id set) or text for the normal pipeline.
  struct Piece {
    std::string_view text;
    size_t offset = 0;  // byte offset in the split text
    std::optional<TokenId> id;
  };
  // Splits `text` on the tokens whose `normalized` flag equals `normalized`.
  std::vector<Piece> Split(std::string_view text, bool normalized) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* FindById(TokenId id) const;
  const AddedToken* FindByContent(std::string_view content) const;

 private:
  struct Matcher {
    // Token indices by first byte, longest content first.
    std::vector<std::vector<int>> by_first_byte = std::vector<std::vector<int>>(256);
    bool empty = true;
  };
  // Index of the longest token of `m` that matches at text[pos], or -1.
  int LongestAt(const Matcher& m, std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<TokenId, int> by_id_;
  absl::flat_hash_map<std::string, int, StringViewHash, StringViewEq> by_content_;
  Matcher raw_, normalized_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_ADDED_VOCABULARY_H_
