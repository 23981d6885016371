// A Hugging Face `tokenizer.json` tokenizer: byte-level BPE (GPT-2 / Llama 3 / Qwen2-3 style)
// and SentencePiece-style BPE with byte fallback (Llama 2 / Mistral style).
//
// Encode runs Hugging Face's pipeline: added tokens are matched first (leftmost-longest),
// the remaining text is normalized, pre-tokenized into words, and each word is split by BPE;
// the post-processor then adds special tokens (e.g. <|begin_of_text|>) if asked to.
// Decode runs the decoder chain. Both are thread-safe.
//
// Cost: every stage is linear in the text (added-token matching through a trie, PCRE2 with
// match limits for the pre-tokenizer, BPE of a long word in O(1) per merge for repetitive
// input), and EncodeBounded stops as soon as the ids cannot fit a limit: a prompt many times
// larger than the context costs about as much as one that fills it.
#ifndef TANDEM_COMMON_TOKENIZER_TOKENIZER_H_
#define TANDEM_COMMON_TOKENIZER_TOKENIZER_H_

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer/added_vocabulary.h"
#include "common/tokenizer/bpe_model.h"
#include "common/tokenizer/decoder.h"
#include "common/tokenizer/normalizer.h"
#include "common/tokenizer/post_processor.h"
#include "common/tokenizer/pre_tokenizer.h"
#include "common/types/dtype.h"

namespace tandem {

class Tokenizer {
 public:
  // Loads `path` (a tokenizer.json file).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);
  // Parses tokenizer.json contents; `path_for_errors` names the source in error messages.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view json,
                                                             const std::string& path_for_errors);

  // Token ids of `text` (invalid UTF-8 is replaced by U+FFFD first). With add_special_tokens
  // the post-processor's tokens are added (BOS for Llama 3.x files that ask for it).
  std::vector<TokenId> Encode(std::string_view text, bool add_special_tokens = true) const;

  // Encode for a context of limited size: the ids of Encode when there are at most `max_tokens`
  // of them (special tokens included), std::nullopt as soon as it is clear that there are more.
  // Words are pre-tokenized and merged one at a time and counted as they are produced, so the
  // text after the point where the limit is passed is never pre-tokenized.
  std::optional<std::vector<TokenId>> EncodeBounded(std::string_view text, bool add_special_tokens,
                                                    size_t max_tokens) const;

  // Text of `ids`; ids that are not in the vocabulary are ignored.
  std::string Decode(std::span<const TokenId> ids, bool skip_special_tokens = false) const;

  // Like Decode but without repairing UTF-8: incomplete or invalid byte sequences are kept as
  // they are. `ids[0]` is treated as the first token of the output (leading-space rules).
  std::string DecodeBytes(std::span<const TokenId> ids, bool skip_special_tokens = false) const;

  // Largest id (model or added token) plus one.
  int vocab_size() const { return vocab_size_; }
  std::optional<TokenId> TokenToId(std::string_view token) const;
  // The token string of `id` (added token content or model token); empty if unknown.
  std::string_view IdToToken(TokenId id) const;
  // True for added tokens marked special (<|eot_id|>, <|im_end|>, ...).
  bool IsSpecial(TokenId id) const;

  const std::vector<AddedToken>& added_tokens() const { return added_.tokens(); }
  // Ids the post-processor puts before / after the text when add_special_tokens is set.
  const std::vector<TokenId>& prefix_special_ids() const { return post_processor_.prefix(); }
  const std::vector<TokenId>& suffix_special_ids() const { return post_processor_.suffix(); }

 private:
  Tokenizer() = default;
  std::vector<std::string> IdsToTokens(std::span<const TokenId> ids, bool skip_special) const;
  // Appends the ids of `text` (valid UTF-8, no special tokens) to `ids`; stops and returns false
  // once ids->size() exceeds `max_ids`.
  bool EncodeText(std::string_view text, size_t max_ids, std::vector<TokenId>* ids) const;

  std::unique_ptr<BpeModel> model_;
  AddedVocabulary added_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  PostProcessor post_processor_;
  Decoder decoder_;
  int vocab_size_ = 0;

  friend class TokenizerLoader;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_TOKENIZER_H_
