// A request's output text as tokens stream in: incremental UTF-8-safe detokenization
// (StreamingDetokenizer) followed by stop-string matching (StopStringMatcher). Not thread-safe;
// one per request attempt.
#ifndef TANDEM_ROUTER_OUTPUT_TEXT_H_
#define TANDEM_ROUTER_OUTPUT_TEXT_H_

#include <span>
#include <string>
#include <vector>

#include "common/tokenizer/streaming_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "router/stop_strings.h"

namespace tandem {

class OutputText {
 public:
  OutputText(const Tokenizer& tokenizer, bool skip_special_tokens, std::vector<std::string> stops,
             bool include_stop_str_in_output);

  struct Step {
    std::string text;
    // Tokens of the input that count as output: all of them, or up to and including the one
    // that completed a stop string.
    size_t tokens_used = 0;
    bool stopped = false;  // a stop string ended the output
  };

  // Feeds the next tokens.
  Step Add(std::span<const TokenId> tokens);
  // The stream ended: returns the text still held (an incomplete character becomes U+FFFD;
  // a stop string completed by it sets stopped()).
  std::string Finish();

  bool stopped() const { return stop_.stopped(); }

 private:
  StreamingDetokenizer detok_;
  StopStringMatcher stop_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_OUTPUT_TEXT_H_
