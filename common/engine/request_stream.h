// A thread-safe inbox for one request's events: the engine thread pushes through Callback(), any
// other thread reads them one by one (Next) or waits for the whole result (Wait).
//
//   RequestStream stream;
//   request.on_event = stream.Callback();
//   ASSIGN_OR_RETURN(RequestId id, engine->Submit(std::move(request)));
//   GenerationResult result = stream.Wait();
#ifndef TANDEM_COMMON_ENGINE_REQUEST_STREAM_H_
#define TANDEM_COMMON_ENGINE_REQUEST_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/engine/request.h"

namespace tandem {

// Everything a finished request produced.
struct GenerationResult {
  RequestId request_id = 0;
  std::vector<TokenId> tokens;  // generated tokens, stop tokens included
  // Parallel to `tokens`: raw logprobs (0 when the request did not ask for logprobs) and the
  // top-N lists (empty when it asked for fewer than 1).
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  // Parallel to `tokens`: the sampler's draws after each (GenerationEvent::rng_counter).
  std::vector<uint64_t> rng_counters;
  FinishReason finish_reason = FinishReason::kNone;
  Usage usage;
  absl::Status status;  // non-OK for kError (and for aborts caused by an engine stop)
};

class RequestStream {
 public:
  RequestStream() = default;
  RequestStream(const RequestStream&) = delete;
  RequestStream& operator=(const RequestStream&) = delete;

  // A callback feeding this stream. The stream must outlive the request's final event.
  EventCallback Callback();
  void Push(const GenerationEvent& event);

  // Blocks for the next unread event; false once the final event has been read.
  bool Next(GenerationEvent* event);
  // Like Next, giving up after `timeout` (returns nullopt then, or after the final event).
  std::optional<GenerationEvent> NextWithTimeout(absl::Duration timeout);

  // True once the final event has arrived.
  bool finished() const;
  // Blocks until the final event, then returns all events folded into one result (independent of
  // how many were read with Next).
  GenerationResult Wait();
  // Like Wait, giving up after `timeout`.
  std::optional<GenerationResult> WaitWithTimeout(absl::Duration timeout);

 private:
  bool HasUnread() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Finished() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_; }
  GenerationResult Fold() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::vector<GenerationEvent> events_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_ENGINE_REQUEST_STREAM_H_
