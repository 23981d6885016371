#include "common/tokenizer/bpe_merge.h"

#include <algorithm>
#include <functional>
#include <queue>

#include "absl/container/flat_hash_map.h"

namespace tandem {
namespace {

// The symbols of a word as a doubly linked list over their initial positions. A merge keeps
// the left position and unlinks the right one.
class SymbolList {
 public:
  explicit SymbolList(std::vector<TokenId>* ids) : ids_(*ids), nodes_(ids->size()) {
    const int32_t n = static_cast<int32_t>(ids->size());
    for (int32_t i = 0; i < n; ++i) nodes_[i] = {(*ids)[i], i - 1, i + 1 < n ? i + 1 : kEnd};
  }

  TokenId id(int32_t i) const { return nodes_[i].id; }
  int32_t prev(int32_t i) const { return nodes_[i].prev; }
  int32_t next(int32_t i) const { return nodes_[i].next; }
  bool Alive(int32_t i) const { return nodes_[i].prev != kDead; }
  // `left` (which may be negative: none) is a live symbol with a right neighbour.
  bool HasPairAt(int32_t left) const { return left >= 0 && nodes_[left].next != kEnd; }

  // The merge that applies at `left` now: `left` is alive, has a right neighbour, and the pair
  // merges into `merged`. Stale candidates fail this check.
  bool Applies(int32_t left, TokenId merged, BpeMergeLookup lookup) const {
    if (!Alive(left) || !HasPairAt(left)) return false;
    const BpeMergeRule* rule = lookup(nodes_[left].id, nodes_[nodes_[left].next].id);
    return rule != nullptr && rule->merged == merged;
  }
  void Merge(int32_t left, TokenId merged) {
    Node& l = nodes_[left];
    Node& r = nodes_[l.next];
    l.id = merged;
    l.next = r.next;
    r.prev = kDead;
    if (l.next != kEnd) nodes_[l.next].prev = left;
  }
  // The rule for the pair starting at `left`, or nullptr.
  const BpeMergeRule* PairAt(int32_t left, BpeMergeLookup lookup) const {
    if (!HasPairAt(left)) return nullptr;
    return lookup(nodes_[left].id, nodes_[nodes_[left].next].id);
  }
  // Writes the surviving symbols back to the vector, in order.
  void Compact() {
    size_t out = 0;
    for (int32_t i = 0; i != kEnd; i = nodes_[i].next) ids_[out++] = nodes_[i].id;
    ids_.resize(out);
  }

 private:
  static constexpr int32_t kEnd = -1;
  static constexpr int32_t kDead = -2;  // in prev: merged into its left neighbour
  struct Node {
    TokenId id;
    int32_t prev, next;
  };
  std::vector<TokenId>& ids_;
  std::vector<Node> nodes_;
};

}  // namespace

void MergeWithPairHeap(std::vector<TokenId>* symbols, BpeMergeLookup lookup) {
  if (symbols->size() < 2) return;
  SymbolList list(symbols);
  struct Candidate {
    int32_t rank;
    int32_t pos;
    TokenId merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push = [&](int32_t left) {
    if (const BpeMergeRule* rule = list.PairAt(left, lookup)) {
      queue.push({rule->rank, left, rule->merged});
    }
  };
  const int32_t n = static_cast<int32_t>(symbols->size());
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    if (!list.Applies(top.pos, top.merged, lookup)) continue;
    list.Merge(top.pos, top.merged);
    push(list.prev(top.pos));
    push(top.pos);
  }
  list.Compact();
}

namespace {

// The pending candidate positions of one rank, smallest first.
class RankBucket {
 public:
  RankBucket(int32_t rank, TokenId merged) : rank_(rank), merged_(merged) {}

  bool empty() const { return cursor_ == run_.size() && late_.empty(); }
  void Push(int32_t pos) {
    if (cursor_ == run_.size()) {
      run_.clear();
      cursor_ = 0;
    }
    if (run_.empty() || pos >= run_.back()) {
      run_.push_back(pos);
    } else {
      late_.push_back(pos);
      std::push_heap(late_.begin(), late_.end(), std::greater<>());
    }
  }
  // The position Pop() returns next (the bucket is not empty).
  int32_t Peek() const {
    if (!late_.empty() && (cursor_ == run_.size() || late_.front() < run_[cursor_])) {
      return late_.front();
    }
    return run_[cursor_];
  }
  int32_t Pop() {
    if (!late_.empty() && (cursor_ == run_.size() || late_.front() < run_[cursor_])) {
      std::pop_heap(late_.begin(), late_.end(), std::greater<>());
      const int32_t pos = late_.back();
      late_.pop_back();
      return pos;
    }
    return run_[cursor_++];
  }
  int32_t rank() const { return rank_; }
  TokenId merged() const { return merged_; }
  bool queued = false;  // in the heap of ranks

 private:
  int32_t rank_;
  TokenId merged_;
  std::vector<int32_t> run_;  // ascending from cursor_
  size_t cursor_ = 0;
  std::vector<int32_t> late_;  // min-heap of positions that arrived below run_.back()
};

}  // namespace

void MergeWithRankBuckets(std::vector<TokenId>* symbols, BpeMergeLookup lookup) {
  if (symbols->size() < 2) return;
  SymbolList list(symbols);
  std::vector<RankBucket> buckets;
  absl::flat_hash_map<int32_t, int32_t> bucket_of_rank;
  // pair -> bucket (-1: the pair does not merge), remembered in a small direct-mapped table:
  // a long word repeats few pairs, and this skips both hash lookups for them.
  struct CacheEntry {
    uint64_t pair = UINT64_MAX;
    int32_t bucket = -1;
  };
  std::vector<CacheEntry> cache(1024);
  auto fill = [&](uint64_t pair, TokenId left, TokenId right, CacheEntry* entry) -> int32_t {
    int32_t bucket = -1;
    if (const BpeMergeRule* rule = lookup(left, right)) {
      auto [it, inserted] =
          bucket_of_rank.try_emplace(rule->rank, static_cast<int32_t>(buckets.size()));
      if (inserted) buckets.emplace_back(rule->rank, rule->merged);
      bucket = it->second;
    }
    *entry = {pair, bucket};
    return bucket;
  };
  auto bucket_for = [&](TokenId left, TokenId right) -> int32_t {
    const uint64_t pair =
        (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
    CacheEntry& entry = cache[(pair * 0x9E3779B97F4A7C15ull) >> 54];
    if (entry.pair == pair) [[likely]] {
      return entry.bucket;
    }
    return fill(pair, left, right, &entry);
  };
  // (rank, bucket) of the buckets with candidates, lowest rank on top.
  using RankEntry = std::pair<int32_t, int32_t>;
  std::priority_queue<RankEntry, std::vector<RankEntry>, std::greater<RankEntry>> ranks;
  auto push = [&](int32_t left) {
    if (!list.HasPairAt(left)) return;
    const int32_t index = bucket_for(list.id(left), list.id(list.next(left)));
    if (index < 0) return;
    RankBucket& bucket = buckets[index];
    bucket.Push(left);
    if (!bucket.queued) {
      bucket.queued = true;
      ranks.push({bucket.rank(), index});
    }
  };
  const int32_t n = static_cast<int32_t>(symbols->size());
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!ranks.empty()) {
    const int32_t index = ranks.top().second;
    RankBucket& bucket = buckets[index];
    if (bucket.empty()) {
      bucket.queued = false;
      ranks.pop();
      continue;
    }
    const int32_t left = bucket.Pop();
    // `bucket` may move when bucket_for() adds a bucket: not used below.
    if (!list.Alive(left) || !list.HasPairAt(left)) continue;
    // The candidate is current if the pair at `left` still merges into this bucket's token.
    const int32_t now = bucket_for(list.id(left), list.id(list.next(left)));
    if (now < 0 || buckets[now].merged() != buckets[index].merged()) continue;
    list.Merge(left, buckets[index].merged());
    push(list.prev(left));
    // The pair (left, q) need not be queued when it can only go stale: when q's own pair, of
    // this rank, is the very next candidate and (left, q) ranks after it. Nothing can merge
    // between the two (lower ranks are done; new candidates of the merges until then lie left
    // of q), so q merges first and changes the pair. This halves the candidates of long runs.
    const int32_t q = list.next(left);
    RankBucket& same_rank = buckets[index];
    while (!same_rank.empty() && !list.Alive(same_rank.Peek())) same_rank.Pop();  // stale for good
    if (q >= 0 && list.HasPairAt(q) && !same_rank.empty() && same_rank.Peek() == q &&
        bucket_for(list.id(q), list.id(list.next(q))) == index) {
      const int32_t after = bucket_for(list.id(left), list.id(q));
      if (after < 0 || buckets[after].rank() > buckets[index].rank()) continue;
    }
    push(left);
  }
  list.Compact();
}

}  // namespace tandem
