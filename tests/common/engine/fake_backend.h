// A Backend for engine tests whose logits depend on exactly what the engine put in the KV pool.
//
// Forward writes each new token (and its position) into a per-slot store addressed through the
// item's block table, as a real backend writes K/V. The logits of an item are then a hash of the
// tokens it *reads back* from the store for positions [0, last] — so a wrong block table, a wrong
// start position, a skipped chunk, a stale or clobbered block changes the output (or fails the
// call when a slot holds another position). ReferenceLogits gives what a correct engine must see:
// the same hash over the true token history. An item asking for several logits rows (speculative
// decoding) gets each row from the history up to that row's token.
//
// set_repeat_period(p) swaps the hash for a model that always continues with the token p places
// back (one-hot logits): its output repeats, so prompt-lookup drafts are accepted.
#ifndef TANDEM_TESTS_COMMON_ENGINE_FAKE_BACKEND_H_
#define TANDEM_TESTS_COMMON_ENGINE_FAKE_BACKEND_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/backend/backend.h"

namespace tandem {

class FakeBackend : public Backend {
 public:
  struct Call {
    int32_t num_items = 0;
    int32_t num_tokens = 0;
    int32_t num_logits = 0;
  };

  FakeBackend(int vocab_size, int num_blocks, int block_size, int max_position_embeddings = 4096,
              std::vector<int> eos_token_ids = {}) {
    config_.vocab_size = vocab_size;
    config_.max_position_embeddings = max_position_embeddings;
    config_.eos_token_ids = std::move(eos_token_ids);
    layout_.num_layers = 1;
    layout_.num_kv_heads = 1;
    layout_.head_dim = 1;
    layout_.block_size = block_size;
    layout_.num_blocks = num_blocks;
    slots_.assign(static_cast<size_t>(num_blocks) * block_size, Slot{});
  }

  std::string_view name() const override { return "fake"; }
  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return layout_; }

  // Locked: tests write KV (WriteKv, CopyBlockFrom) and read calls() beside the engine thread.
  absl::Status Forward(const ForwardBatch& batch, LogitsOutput out) override {
    absl::MutexLock lock(&mu_);
    if (!fail_next_.ok()) {
      absl::Status s = fail_next_;
      fail_next_ = absl::OkStatus();
      return s;
    }
    const int bs = layout_.block_size;
    Call call;
    call.num_items = static_cast<int32_t>(batch.items.size());
    for (const ForwardItem& item : batch.items) {
      if (item.tokens.empty()) return absl::InvalidArgumentError("empty item");
      const int64_t end = int64_t{item.start_pos} + static_cast<int64_t>(item.tokens.size());
      if (item.start_pos < 0 || static_cast<int64_t>(item.block_table.size()) * bs < end) {
        return absl::InvalidArgumentError(absl::StrCat("block table of ", item.block_table.size(),
                                                       " blocks does not cover position ", end));
      }
      for (int32_t b : item.block_table) {
        if (b < 0 || b >= layout_.num_blocks) {
          return absl::InvalidArgumentError(absl::StrCat("block id ", b, " out of range"));
        }
      }
      call.num_tokens += static_cast<int32_t>(item.tokens.size());
      call.num_logits += LogitsRows(item);
    }
    if (out.logits.size() < static_cast<size_t>(call.num_logits) * config_.vocab_size) {
      return absl::InvalidArgumentError("logits buffer too small");
    }
    // Write every item's new tokens first (a real backend writes a layer's K/V before attention).
    for (const ForwardItem& item : batch.items) {
      for (size_t i = 0; i < item.tokens.size(); ++i) {
        const int32_t pos = item.start_pos + static_cast<int32_t>(i);
        const TokenId t = item.tokens[i];
        if (t < 0 || t >= config_.vocab_size) return absl::InvalidArgumentError("bad token id");
        slots_[SlotIndex(item.block_table, pos)] = Slot{t, pos};
      }
    }
    size_t row = 0;
    std::vector<TokenId> history;
    for (const ForwardItem& item : batch.items) {
      const int32_t end = item.start_pos + static_cast<int32_t>(item.tokens.size());
      for (int32_t last = end - LogitsRows(item); last < end; ++last) {
        history.clear();
        for (int32_t pos = 0; pos <= last; ++pos) {
          const Slot& slot = slots_[SlotIndex(item.block_table, pos)];
          if (slot.pos != pos) {
            return absl::InternalError(
                absl::StrCat("position ", pos, " reads a slot holding position ", slot.pos));
          }
          history.push_back(slot.token);
        }
        std::span<float> logits = out.logits.subspan(row * config_.vocab_size, config_.vocab_size);
        if (repeat_period_ > 0) {
          std::fill(logits.begin(), logits.end(), 0.0f);
          const size_t back = std::min(history.size(), static_cast<size_t>(repeat_period_));
          logits[history[history.size() - back]] = 1.0f;
        } else {
          ReferenceLogits(history, config_.vocab_size, logits);
        }
        ++row;
      }
    }
    calls_.push_back(call);
    return absl::OkStatus();
  }

  // The logits a correct engine gets after `history` (all tokens up to and including the last).
  static void ReferenceLogits(std::span<const TokenId> history, int vocab_size,
                              std::span<float> out) {
    uint64_t h = 0x5eed;
    for (TokenId t : history) h = Mix(h ^ (static_cast<uint64_t>(t) + 0x9E3779B97F4A7C15ULL));
    for (int v = 0; v < vocab_size; ++v) {
      const uint64_t x = Mix(h + static_cast<uint64_t>(v) * 0xD1B54A32D192ED03ULL);
      out[v] = static_cast<float>(x >> 40) * (10.0f / 16777216.0f);  // [0, 10)
    }
  }

  // Greedy continuation of `prompt` by the reference model, stopping after `max_tokens` or at the
  // first token in `stop_ids` (included).
  static std::vector<TokenId> ReferenceGreedy(std::vector<TokenId> prompt, int vocab_size,
                                              int max_tokens,
                                              const std::vector<TokenId>& stop_ids = {}) {
    std::vector<TokenId> out;
    std::vector<float> logits(vocab_size);
    while (static_cast<int>(out.size()) < max_tokens) {
      ReferenceLogits(prompt, vocab_size, logits);
      TokenId best = 0;
      for (int v = 1; v < vocab_size; ++v) {
        if (logits[v] > logits[best]) best = v;
      }
      out.push_back(best);
      prompt.push_back(best);
      if (std::find(stop_ids.begin(), stop_ids.end(), best) != stop_ids.end()) break;
    }
    return out;
  }

  void FailNextForward(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_next_ = std::move(status);
  }
  std::vector<Call> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  ModelConfig& mutable_config() { return config_; }
  void set_repeat_period(int period) {
    absl::MutexLock lock(&mu_);
    repeat_period_ = period;
  }

  // What a KV transfer does: block `src_block` of `src`'s pool overwrites `dst_block` of this one.
  void CopyBlockFrom(const FakeBackend& src, int32_t src_block, int32_t dst_block) {
    // Different backends (a prefill's pool into a decode's); one backend into itself is not a
    // transfer.
    absl::MutexLock lock(&mu_);
    absl::MutexLock src_lock(&src.mu_);
    const int bs = layout_.block_size;
    for (int i = 0; i < bs; ++i) {
      slots_[static_cast<size_t>(dst_block) * bs + i] =
          src.slots_[static_cast<size_t>(src_block) * bs + i];
    }
  }

 private:
  struct Slot {
    TokenId token = -1;
    int32_t pos = -1;
  };

  static uint64_t Mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  size_t SlotIndex(std::span<const int32_t> table, int32_t pos) const {
    const int bs = layout_.block_size;
    return static_cast<size_t>(table[pos / bs]) * bs + pos % bs;
  }

  ModelConfig config_;
  KvLayout layout_;
  mutable absl::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_next_ ABSL_GUARDED_BY(mu_);
  int repeat_period_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tandem

#endif  // TANDEM_TESTS_COMMON_ENGINE_FAKE_BACKEND_H_
