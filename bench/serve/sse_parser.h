// Splitting a server-sent event stream (text/event-stream) into events, incrementally, as bytes
// arrive from the socket: events end at a blank line; an event's "data:" lines are its payload
// (joined with '\n', one optional space after the colon removed); comments (":...") and other
// fields (event:, id:, retry:) are skipped. Lines may end in "\n", "\r\n" or "\r".
#ifndef TANDEM_BENCH_SERVE_SSE_PARSER_H_
#define TANDEM_BENCH_SERVE_SSE_PARSER_H_

#include <string>
#include <string_view>
#include <vector>

namespace tandem::bench {

class SseParser {
 public:
  // Appends `bytes` and adds the data of every event they complete to `events`, in order. An
  // event without data lines (a comment, a keep-alive) yields nothing.
  void Feed(std::string_view bytes, std::vector<std::string>* events);

  // Bytes of an unfinished event still held.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  // Handles one complete line (without its terminator).
  void Line(std::string_view line, std::vector<std::string>* events);

  std::string pending_;  // the unfinished line
  std::string data_;     // data of the event being read
  bool has_data_ = false;
  bool last_was_cr_ = false;  // the previous Feed ended in '\r' (a "\r\n" may be split)
};

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_SSE_PARSER_H_
