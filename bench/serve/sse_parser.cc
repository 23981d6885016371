#include "bench/serve/sse_parser.h"

namespace tandem::bench {

void SseParser::Feed(std::string_view bytes, std::vector<std::string>* events) {
  size_t i = 0;
  if (last_was_cr_ && !bytes.empty() && bytes[0] == '\n') i = 1;  // the rest of a "\r\n"
  last_was_cr_ = false;
  while (i < bytes.size()) {
    const size_t end = bytes.find_first_of("\r\n", i);
    if (end == std::string_view::npos) {
      pending_.append(bytes.substr(i));
      return;
    }
    if (pending_.empty()) {
      Line(bytes.substr(i, end - i), events);
    } else {
      pending_.append(bytes.substr(i, end - i));
      std::string line = std::move(pending_);
      pending_.clear();
      Line(line, events);
    }
    i = end + 1;
    if (bytes[end] == '\r') {
      if (i < bytes.size()) {
        if (bytes[i] == '\n') ++i;
      } else {
        last_was_cr_ = true;
      }
    }
  }
}

void SseParser::Line(std::string_view line, std::vector<std::string>* events) {
  if (line.empty()) {  // end of the event
    if (has_data_) events->push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line[0] == ':') return;  // comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  if (field != "data") return;
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

}  // namespace tandem::bench
