#include "common/tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "common/tokenizer/unicode/str_util.h"
#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem {

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Build(
    BpeOptions options, const std::vector<std::pair<std::string_view, TokenId>>& vocab,
    const std::vector<std::pair<std::string_view, std::string_view>>& merges,
    std::string_view where) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel());
  model->options_ = std::move(options);
  TokenId max_id = -1;
  size_t total = 0;
  for (const auto& [token, id] : vocab) {
    if (id < 0) {
      return absl::InvalidArgumentError(
          Cat(where, ".vocab: negative id ", id, " for token '", token, "'"));
    }
    max_id = std::max(max_id, id);
    total += token.size();
  }
  model->arena_.reserve(total);
  model->id_spans_.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [token, id] : vocab) {
    model->id_spans_[id] = {static_cast<uint32_t>(model->arena_.size()),
                            static_cast<uint32_t>(token.size())};
    model->arena_.append(token);
  }
  model->vocab_.reserve(vocab.size());
  for (const auto& [token, id] : vocab) {
    const Span& s = model->id_spans_[id];
    model->vocab_.emplace(std::string_view(model->arena_).substr(s.offset, s.size), id);
  }
  if (model->options_.unk_token) {
    auto it = model->vocab_.find(*model->options_.unk_token);
    if (it == model->vocab_.end()) {
      return absl::InvalidArgumentError(
          Cat(where, ".unk_token: '", *model->options_.unk_token, "' is not in the vocabulary"));
    }
    model->unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = model->vocab_.find(std::string_view(name));
    model->byte_ids_[b] = it == model->vocab_.end() ? -1 : it->second;
  }
  const std::string& prefix = model->options_.continuing_subword_prefix;
  model->merges_.reserve(merges.size());
  std::string merged;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto a = model->vocab_.find(left);
    auto b = model->vocab_.find(right);
    if (a == model->vocab_.end() || b == model->vocab_.end()) {
      return absl::InvalidArgumentError(Cat(where, ".merges[", rank, "]: '", left, " ", right,
                                            "' uses a token not in the vocabulary"));
    }
    std::string_view right_part = right;
    if (!prefix.empty() && right_part.substr(0, prefix.size()) == prefix) {
      right_part.remove_prefix(prefix.size());
    }
    merged.assign(left);
    merged.append(right_part);
    auto m = model->vocab_.find(merged);
    if (m == model->vocab_.end()) {
      return absl::InvalidArgumentError(Cat(where, ".merges[", rank, "]: the merge of '", left,
                                            "' and '", right, "' is not in the vocabulary"));
    }
    // The first occurrence of a pair keeps its (lower) rank.
    model->merges_.try_emplace(PairKey(a->second, b->second),
                               BpeMergeRule{static_cast<int32_t>(rank), m->second});
  }
  model->ComputeTokenBounds();
  return model;
}

std::optional<TokenId> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string_view> BpeModel::IdToToken(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_spans_.size()) return std::nullopt;
  const Span& s = id_spans_[id];
  if (s.size == UINT32_MAX) return std::nullopt;
  return std::string_view(arena_).substr(s.offset, s.size);
}

void BpeModel::ComputeTokenBounds() {
  if (options_.unk_token && options_.unk_token->empty()) return;
  // Longest token (in code points) containing each character.
  absl::flat_hash_map<char32_t, uint32_t> longest_with_char;
  for (const auto& [token, id] : vocab_) {
    uint32_t length = 0;
    for (char c : token) length += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    longest_token_ = std::max(longest_token_, length);
    size_t i = 0;
    while (i < token.size()) {
      uint32_t& longest = longest_with_char[unicode::DecodeUtf8(token, &i)];
      longest = std::max(longest, length);
    }
  }
  const std::string& prefix = options_.continuing_subword_prefix;
  longest_token_with_.assign(id_spans_.size(), longest_token_);
  for (const auto& [token, id] : vocab_) {
    // A merge drops the prefix of its right part: only the rest is sure to be in the merge.
    std::string_view core = token;
    if (!prefix.empty() && core.substr(0, prefix.size()) == prefix)
      core.remove_prefix(prefix.size());
    size_t i = 0;
    while (i < core.size()) {
      const char32_t c = unicode::DecodeUtf8(core, &i);
      longest_token_with_[id] = std::min(longest_token_with_[id], longest_with_char[c]);
    }
    longest_token_with_[id] = std::max<uint32_t>(longest_token_with_[id], 1);
  }
}

size_t BpeModel::FewestTokens(const std::vector<TokenId>& symbols) const {
  if (longest_token_with_.empty()) return symbols.empty() ? 0 : 1;
  // counts[l]: symbols whose tokens are at most l symbols long. Each token covers at most l of
  // them, so they need at least counts[l] / l tokens of their own share.
  std::vector<size_t> counts(longest_token_ + 1);
  for (TokenId id : symbols) ++counts[longest_token_with_[id]];
  size_t fewest = 0;
  for (uint32_t l = 1; l <= longest_token_; ++l) fewest += counts[l] / l;
  return fewest;
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<TokenId>* symbols) const {
  // Long words repeat few characters: the vocabulary lookups of characters that are neither
  // first nor last (those take the prefix / suffix) are remembered in a small direct-mapped
  // table keyed by the character's bytes.
  struct MemoEntry {
    uint64_t key = 0;  // bytes | length << 32; 0: empty
    TokenId id = -1;
  };
  constexpr size_t kMemoSize = 256;
  const bool memoize = word.size() >= kMaxCachedWordBytes;
  std::vector<MemoEntry> memo(memoize ? kMemoSize : 0);
  std::optional<TokenId> pending_unk;
  std::string piece;
  size_t i = 0;
  while (i < word.size()) {
    const size_t start = i;
    unicode::DecodeUtf8(word, &i);
    MemoEntry* entry = nullptr;
    uint64_t key = 0;
    if (memoize && start > 0 && i < word.size() && i - start <= 4) {
      key = uint64_t{i - start} << 32;
      for (size_t b = start; b < i; ++b) {
        key |= uint64_t{static_cast<unsigned char>(word[b])} << (8 * (b - start));
      }
      entry = &memo[(key * 0x9E3779B97F4A7C15ull) >> 56];
      if (entry->key == key) {
        if (pending_unk) symbols->push_back(*std::exchange(pending_unk, std::nullopt));
        symbols->push_back(entry->id);
        continue;
      }
    }
    piece.assign(word.substr(start, i - start));
    if (start > 0) piece.insert(0, options_.continuing_subword_prefix);
    if (i == word.size()) piece += options_.end_of_word_suffix;
    if (auto it = vocab_.find(piece); it != vocab_.end()) {
      if (pending_unk) symbols->push_back(*std::exchange(pending_unk, std::nullopt));
      symbols->push_back(it->second);
      if (entry != nullptr) *entry = {key, it->second};
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : piece) all &= byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        if (pending_unk) symbols->push_back(*std::exchange(pending_unk, std::nullopt));
        for (char c : piece) symbols->push_back(byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    // Without an unknown token the character is dropped, as in Hugging Face tokenizers.
    if (unk_id_) {
      if (pending_unk && !options_.fuse_unk) symbols->push_back(*pending_unk);
      pending_unk = unk_id_;
    }
  }
  if (pending_unk) symbols->push_back(*pending_unk);
}

void BpeModel::MergeSymbols(std::vector<TokenId>* symbols) const {
  auto lookup = [this](TokenId left, TokenId right) -> const BpeMergeRule* {
    auto it = merges_.find(PairKey(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  };
  if (symbols->size() >= kLongWordSymbols) {
    MergeWithRankBuckets(symbols, lookup);
  } else {
    MergeWithPairHeap(symbols, lookup);
  }
}

void BpeModel::EncodeWord(std::string_view word, std::vector<TokenId>* out) const {
  EncodeWordBounded(word, SIZE_MAX, out);
}

bool BpeModel::EncodeWordBounded(std::string_view word, size_t max_total,
                                 std::vector<TokenId>* out) const {
  if (word.empty()) return out->size() <= max_total;
  if (options_.ignore_merges) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out->push_back(it->second);
      return out->size() <= max_total;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return out->size() <= max_total;
    }
  }
  std::vector<TokenId> symbols;
  symbols.reserve(word.size());
  InitialSymbols(word, &symbols);
  if (out->size() > max_total) return false;
  // Worth counting only when the symbols alone would not fit.
  if (symbols.size() > max_total - out->size() && FewestTokens(symbols) > max_total - out->size()) {
    return false;
  }
  MergeSymbols(&symbols);
  out->insert(out->end(), symbols.begin(), symbols.end());
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(word, std::move(symbols));
  }
  return out->size() <= max_total;
}

}  // namespace tandem
