// Incremental detokenization for streamed generation: feed token ids one at a time and get
// back only complete UTF-8 text. Bytes of a character split across tokens are held until the
// character is complete; sequences that can never become valid are emitted as U+FFFD (as
// Python's errors="replace" / Rust's from_utf8_lossy would), and Flush emits what is left.
//
// The concatenation of everything returned equals Tokenizer::Decode of all ids pushed, including
// the decoder's leading-space rules (Metaspace / Strip), because every new token is decoded
// together with its predecessor and only the difference is emitted (Hugging Face's DecodeStream
// technique). One exception: a byte-fallback run that is valid UTF-8 up to some point and then
// turns invalid is decoded character by character here, while Decode replaces the whole run.
//
// Not thread-safe; use one per sequence. The tokenizer must outlive it.
#ifndef TANDEM_COMMON_TOKENIZER_STREAMING_DETOKENIZER_H_
#define TANDEM_COMMON_TOKENIZER_STREAMING_DETOKENIZER_H_

#include <string>
#include <vector>

#include "common/tokenizer/tokenizer.h"

namespace tandem {

class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = false);

  // Adds one token and returns the text it completes (possibly empty).
  std::string Push(TokenId id);

  // Returns the text still held back (a truncated character becomes U+FFFD). Call at the end
  // of the stream.
  std::string Flush();

  // Bytes currently held back because they end in an incomplete character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string TakeComplete();

  const Tokenizer& tokenizer_;
  const bool skip_special_tokens_;
  std::vector<TokenId> window_;  // tokens decoded together with the next one
  std::string window_bytes_;     // DecodeBytes(window_), already accounted for
  std::string pending_;          // decoded bytes not yet returned
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TOKENIZER_STREAMING_DETOKENIZER_H_
