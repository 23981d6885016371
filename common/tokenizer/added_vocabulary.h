// The "added_tokens" of tokenizer.json: tokens matched verbatim in the input before the normal
// pipeline runs (special tokens such as <|eot_id|>, and non-special ones such as <think>).
// Matching is leftmost-longest, like Hugging Face's Aho-Corasick matcher, and honours the
// single_word, lstrip, rstrip and normalized flags. The tokens sit in a byte trie, so a split
// costs at most (text length) x (longest token) steps, whatever the text.
#ifndef TANDEM_COMMON_TOKENIZER_ADDED_VOCABULARY_H_
#define TANDEM_COMMON_TOKENIZER_ADDED_VOCABULARY_H_

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
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
  // `normalize` maps the content of tokens with normalized=true to the form they are matched
  // in (Hugging Face matches them in normalized text by their normalized content).
  explicit AddedVocabulary(std::vector<AddedToken> tokens,
                           const std::function<std::string(std::string_view)>& normalize = nullptr);

  // A piece of text: either an added token (id set) or text for the normal pipeline.
  struct Piece {
    std::string_view text;
    size_t offset = 0;  // byte offset in the split text
    std::optional<TokenId> id;
  };
  // Splits `text` on the tokens whose `normalized` flag equals `normalized`, passing the pieces
  // in order to `on_piece`; stops when it returns false. Returns false if stopped.
  bool ForEachPiece(std::string_view text, bool normalized,
                    absl::FunctionRef<bool(const Piece&)> on_piece) const;
  // All pieces of ForEachPiece.
  std::vector<Piece> Split(std::string_view text, bool normalized) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* FindById(TokenId id) const;
  const AddedToken* FindByContent(std::string_view content) const;

 private:
  // A byte trie of the matched texts. Node 0 is the root.
  struct Matcher {
    // (node << 8 | byte) -> child node.
    absl::flat_hash_map<uint64_t, int32_t> children;
    // Whether some text starts with the byte (skips the map for most bytes of a text).
    std::array<bool, 256> starts_with = {};
    // Per node: the index into tokens_ of the token whose text ends here, or -1.
    std::vector<int32_t> token_at = {-1};
    bool empty = true;
    void Add(std::string_view text, int32_t token);
  };
  // The token of the longest text matching at text[pos] and its length, or {-1, 0}.
  static std::pair<int32_t, size_t> LongestAt(const Matcher& m, std::string_view text, size_t pos);

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<TokenId, int> by_id_;
  absl::flat_hash_map<std::string, int, StringViewHash, StringViewEq> by_content_;
  Matcher raw_, normalized_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_ADDED_VOCABULARY_H_
