#include "common/tokenizer/streaming_detokenizer.h"

#include "common/tokenizer/unicode/unicode_util.h"

namespace tandem {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamingDetokenizer::TakeComplete() {
  const size_t n = unicode::CompleteUtf8PrefixLength(pending_);
  std::string out = unicode::Utf8Lossy(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamingDetokenizer::Push(TokenId id) {
  // Ids Decode would drop (unknown, or skipped specials) leave the state untouched.
  if (tokenizer_.IdToToken(id).empty()) return {};
  if (skip_special_tokens_ && tokenizer_.IsSpecial(id)) return {};
  window_.push_back(id);
  const std::string full = tokenizer_.DecodeBytes(window_, skip_special_tokens_);
  if (full.compare(0, window_bytes_.size(), window_bytes_) != 0) {
    // The decoder rewrote earlier output (only possible with trailing-strip decoders); wait
    // for more tokens, keeping the window so the final text is still right at Flush.
    return {};
  }
  pending_.append(full, window_bytes_.size());
  window_.assign(1, id);
  window_bytes_ = tokenizer_.DecodeBytes(window_, skip_special_tokens_);
  return TakeComplete();
}

std::string StreamingDetokenizer::Flush() {
  if (window_.size() > 1) {
    // Output held back by a non-prefix-stable decoder: emit the part after what was shared.
    const std::string full = tokenizer_.DecodeBytes(window_, skip_special_tokens_);
    size_t common = 0;
    while (common < full.size() && common < window_bytes_.size() &&
           full[common] == window_bytes_[common]) {
      ++common;
    }
    pending_.append(full, common);
    window_.assign(1, window_.back());
    window_bytes_ = tokenizer_.DecodeBytes(window_, skip_special_tokens_);
  }
  std::string out = unicode::Utf8Lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace tandem
