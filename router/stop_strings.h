// Incremental stop-string matching over streamed text. Text that might be the start of a stop
// string is held back until the next chunk decides it; the output ends where the first stop
// string begins (or just after it, with include_stop_str_in_output). Stop strings may span chunk
// boundaries. Not thread-safe; one per request.
#ifndef TANDEM_ROUTER_STOP_STRINGS_H_
#define TANDEM_ROUTER_STOP_STRINGS_H_

#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class StopStringMatcher {
 public:
  StopStringMatcher(std::vector<std::string> stops, bool include_stop_str_in_output);

  struct Result {
    std::string text;      // safe to send now
    bool stopped = false;  // a stop string was found; nothing more will be emitted
  };

  // Adds the next chunk of output text.
  Result Push(std::string_view text);
  // The end of the stream: returns whatever is still held back ("" after a stop).
  std::string Flush();

  bool stopped() const { return stopped_; }
  // The stop string that matched ("" if none).
  const std::string& matched() const { return matched_; }
  size_t held_bytes() const { return held_.size(); }

 private:
  std::vector<std::string> stops_;
  const bool include_stop_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_STOP_STRINGS_H_
