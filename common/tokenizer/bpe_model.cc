#include "common/tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

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
                               MergeValue{static_cast<int32_t>(rank), m->second});
  }
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

void BpeModel::InitialSymbols(std::string_view word, std::vector<TokenId>* symbols) const {
  std::optional<TokenId> pending_unk;
  std::string piece;
  size_t i = 0;
  while (i < word.size()) {
    const size_t start = i;
    unicode::DecodeUtf8(word, &i);
    piece.assign(word.substr(start, i - start));
    if (start > 0) piece.insert(0, options_.continuing_subword_prefix);
    if (i == word.size()) piece += options_.end_of_word_suffix;
    if (auto it = vocab_.find(piece); it != vocab_.end()) {
      if (pending_unk) symbols->push_back(*std::exchange(pending_unk, std::nullopt));
      symbols->push_back(it->second);
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
  const int n = static_cast<int>(symbols->size());
  if (n < 2) return;
  std::vector<TokenId>& id = *symbols;
  std::vector<int> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int pos;
    TokenId merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push_pair = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    auto it = merges_.find(PairKey(id[left], id[next[left]]));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.merged});
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const int left = top.pos;
    if (!alive[left] || next[left] < 0) continue;
    const int right = next[left];
    // Skip stale entries: the pair at `left` must still merge into the same token.
    auto it = merges_.find(PairKey(id[left], id[right]));
    if (it == merges_.end() || it->second.merged != top.merged) continue;
    id[left] = top.merged;
    alive[right] = false;
    next[left] = next[right];
    if (next[left] >= 0) prev[next[left]] = left;
    push_pair(prev[left]);
    push_pair(left);
  }
  size_t out = 0;
  for (int i = 0; i >= 0 && i < n; i = next[i]) id[out++] = id[i];
  id.resize(out);
}

void BpeModel::EncodeWord(std::string_view word, std::vector<TokenId>* out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<TokenId> symbols;
  symbols.reserve(word.size());
  InitialSymbols(word, &symbols);
  MergeSymbols(&symbols);
  out->insert(out->end(), symbols.begin(), symbols.end());
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(word, std::move(symbols));
  }
}

}  // namespace tandem
