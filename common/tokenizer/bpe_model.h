// Byte-pair-encoding model of tokenizer.json ("model": {"type": "BPE", ...}): vocabulary,
// ranked merges, unknown token, byte fallback (<0xNN> tokens), ignore_merges and the
// continuing-subword prefix / end-of-word suffix options, with Hugging Face's merge order
// (lowest rank first, leftmost first among equal ranks).
#ifndef TANDEM_COMMON_TOKENIZER_BPE_MODEL_H_
#define TANDEM_COMMON_TOKENIZER_BPE_MODEL_H_

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/tokenizer/bpe_merge.h"
#include "common/tokenizer/unicode/str_util.h"
#include "common/types/dtype.h"

namespace tandem {

struct BpeOptions {
  std::optional<std::string> unk_token;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
};

class BpeModel {
 public:
  // `vocab` maps token strings to ids; `merges` are (left, right) pairs in rank order.
  // `where` names the model in errors (e.g. "/m/tokenizer.json: model").
  static absl::StatusOr<std::unique_ptr<BpeModel>> Build(
      BpeOptions options, const std::vector<std::pair<std::string_view, TokenId>>& vocab,
      const std::vector<std::pair<std::string_view, std::string_view>>& merges,
      std::string_view where);

  // Appends the ids of one pre-tokenized word. Thread-safe.
  void EncodeWord(std::string_view word, std::vector<TokenId>* out) const;

  // Like EncodeWord, but gives up as soon as it is known that `out` would end up with more than
  // `max_total` ids; returns false then (`out` holds some prefix of the word's ids). A long word
  // whose symbols cannot fit in the room left even if every token were as long as the longest
  // one in the vocabulary is rejected before any merging.
  bool EncodeWordBounded(std::string_view word, size_t max_total, std::vector<TokenId>* out) const;

  std::optional<TokenId> TokenToId(std::string_view token) const;
  // The token string of `id`, or nullopt when the model has no such id.
  std::optional<std::string_view> IdToToken(TokenId id) const;
  // One more than the largest id in the vocabulary.
  TokenId id_limit() const { return static_cast<TokenId>(id_spans_.size()); }

  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;
  bool byte_fallback() const { return options_.byte_fallback; }

 private:
  static uint64_t PairKey(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // Initial symbols of a word (characters, byte-fallback bytes, unknown tokens).
  void InitialSymbols(std::string_view word, std::vector<TokenId>* symbols) const;
  void MergeSymbols(std::vector<TokenId>* symbols) const;

  BpeModel() = default;

  BpeOptions options_;
  std::optional<TokenId> unk_id_;
  // All token strings back to back; vocab_ keys and id_spans_ point into it, so it is never
  // resized after construction (one allocation instead of two per token: loading is faster).
  std::string arena_;
  struct Span {
    uint32_t offset = 0;
    uint32_t size = UINT32_MAX;  // UINT32_MAX: no token has this id
  };
  std::vector<Span> id_spans_;
  absl::flat_hash_map<std::string_view, TokenId, StringViewHash, StringViewEq> vocab_;
  absl::flat_hash_map<uint64_t, BpeMergeRule> merges_;
  // Bounds for EncodeWordBounded. A token merged from k initial symbols is at least k code
  // points long, and every token that contains a symbol contains the symbol's characters. So a
  // token containing symbol x stands for at most longest_token_with_[x] symbols (the longest
  // vocabulary token containing the rarest of x's characters), and a word of symbols x_i has
  // at least sum_i 1 / longest_token_with_[x_i] tokens. Empty when no bound can be given (an
  // empty unknown token would stand for a character without taking room).
  std::vector<uint32_t> longest_token_with_;  // by id
  uint32_t longest_token_ = 1;                // in code points
  // At least this many tokens encode `symbols` (see longest_token_with_).
  size_t FewestTokens(const std::vector<TokenId>& symbols) const;
  void ComputeTokenBounds();
  std::array<TokenId, 256> byte_ids_{};  // <0xNN> token ids, -1 when absent

  static constexpr size_t kCacheCapacity = 50000;
  static constexpr size_t kMaxCachedWordBytes = 256;
  // Words with at least this many symbols merge with MergeWithRankBuckets.
  static constexpr size_t kLongWordSymbols = 256;
  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<TokenId>, StringViewHash, StringViewEq>
      cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_BPE_MODEL_H_
