#include "router/stop_strings.h"

#include <algorithm>
#include <utility>

namespace tandem {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops,
                                     bool include_stop_str_in_output)
    : include_stop_(include_stop_str_in_output) {
  for (std::string& s : stops) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

StopStringMatcher::Result StopStringMatcher::Push(std::string_view text) {
  Result result;
  if (stopped_) {
    result.stopped = true;
    return result;
  }
  held_.append(text);
  if (stops_.empty()) {
    result.text.swap(held_);
    return result;
  }
  // The earliest occurrence of any stop string; at one position the longest one wins.
  size_t best_pos = std::string::npos;
  const std::string* best = nullptr;
  for (const std::string& stop : stops_) {
    size_t pos = held_.find(stop);
    if (pos == std::string::npos) continue;
    if (pos < best_pos || (pos == best_pos && stop.size() > best->size())) {
      best_pos = pos;
      best = &stop;
    }
  }
  if (best != nullptr) {
    const size_t end = include_stop_ ? best_pos + best->size() : best_pos;
    result.text = held_.substr(0, end);
    result.stopped = true;
    stopped_ = true;
    matched_ = *best;
    held_.clear();
    return result;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string. Stop strings are
  // valid UTF-8, so the cut falls on a character boundary of (valid) text.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    const size_t longest = std::min(stop.size() - 1, held_.size());
    for (size_t len = longest; len > keep; --len) {
      if (std::string_view(held_).substr(held_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  result.text = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return result;
}

std::string StopStringMatcher::Flush() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace tandem
