// Turning a streamed completion into a RequestResult: which events carry tokens, when they
// arrived (TTFT, inter-token gaps, end-to-end time) and the server's usage counts. Shared by the
// HTTP client (OpenAI SSE chunks, CompletionStreamReader) and the gRPC client (StreamRecorder
// fed with GenerateResponses directly).
#ifndef TANDEM_BENCH_SERVE_COMPLETION_STREAM_H_
#define TANDEM_BENCH_SERVE_COMPLETION_STREAM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/serve/bench_request.h"
#include "bench/serve/sse_parser.h"

namespace tandem::bench {

// Arrival times of one request's output.
class StreamRecorder {
 public:
  explicit StreamRecorder(absl::Time sent) : sent_(sent) {}

  // An event carrying output (`tokens` of it, >= 1 counted per event) arrived at `at`.
  void Content(absl::Time at, int tokens);
  // The server's token counts (the last call wins).
  void Usage(int32_t prompt_tokens, int32_t completion_tokens);

  bool got_content() const { return first_.has_value(); }

  // A successful result for `request`, whose response ended at `end`: TTFT to the first content
  // event, ITL between consecutive ones, E2E to `end`; token counts from the usage when given,
  // else the request's prompt_len and the tokens counted.
  RequestResult Finish(absl::Time end, const BenchRequest& request) const;

 private:
  const absl::Time sent_;
  std::optional<absl::Time> first_;
  absl::Time last_;
  std::vector<double> itl_s_;
  int64_t tokens_ = 0;
  std::optional<int32_t> usage_prompt_, usage_completion_;
};

// What one OpenAI stream event ("data: ..." payload) says.
struct CompletionEvent {
  bool done = false;  // "[DONE]"
  // Carries a choice with output: non-empty text (completions) or delta content (chat), token
  // ids, or no finish_reason (text may be empty when a token ends inside a UTF-8 character). A
  // choice with only a finish_reason and no text is the end of the stream, not a token.
  bool content = false;
  int tokens = 0;  // token_ids' size when the server sends them, else 1 per content event
  std::optional<int32_t> prompt_tokens, completion_tokens;  // a "usage" object
  std::string error;  // an {"error": {...}} event: its message (non-empty)
};

// InvalidArgument when `data` is neither "[DONE]" nor a JSON object.
absl::StatusOr<CompletionEvent> ParseCompletionEvent(std::string_view data);

// A /v1/completions (or /v1/chat/completions) SSE body, fed as it is read.
class CompletionStreamReader {
 public:
  explicit CompletionStreamReader(absl::Time sent) : recorder_(sent) {}

  // Body bytes received at `at`. An error event or a malformed one fails (stop reading).
  absl::Status Feed(std::string_view bytes, absl::Time at);
  // "data: [DONE]" was read.
  bool done() const { return done_; }

  // The request's result after the body ended at `end`: a failure when the stream ended without
  // [DONE] or without any output, else the recorder's result.
  RequestResult Finish(absl::Time end, const BenchRequest& request) const;

 private:
  SseParser parser_;
  StreamRecorder recorder_;
  std::vector<std::string> events_;
  bool done_ = false;
};

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_COMPLETION_STREAM_H_
