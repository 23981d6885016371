#include "router/output_text.h"

#include <utility>

namespace tandem {

OutputText::OutputText(const Tokenizer& tokenizer, bool skip_special_tokens,
                       std::vector<std::string> stops, bool include_stop_str_in_output)
    : detok_(tokenizer, skip_special_tokens), stop_(std::move(stops), include_stop_str_in_output) {}

OutputText::Step OutputText::Add(std::span<const TokenId> tokens) {
  Step step;
  for (TokenId id : tokens) {
    if (stop_.stopped()) break;
    ++step.tokens_used;
    StopStringMatcher::Result r = stop_.Push(detok_.Push(id));
    step.text += r.text;
    if (r.stopped) step.stopped = true;
  }
  return step;
}

std::string OutputText::Finish() {
  if (stop_.stopped()) return "";
  StopStringMatcher::Result r = stop_.Push(detok_.Flush());
  if (r.stopped) return r.text;
  return r.text + stop_.Flush();
}

}  // namespace tandem
