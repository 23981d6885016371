// The ResponseSink of one OpenAI HTTP request: the request runner writes v1::GenerateResponses
// into it, one at a time; it turns them into OpenAI JSON (openai_response) and
//   streaming:     hands each chunk as an SSE event to the connection (StreamOutput), holding
//                  back the write's completion while more than `max_queued_bytes` are queued
//                  unwritten (backpressure); the response header goes out with the first event, so
//                  an error before any output is still a plain JSON error with its status;
//   non-streaming: collects everything for one JSON body at the end.
// Once the runner returns, Finish() says what the connection must still send.
//
// The connection reports written bytes (BytesWritten) and a peer that went away
// (ClientClosed); ClientGone() then turns true and the runner cancels the request on its nodes.
#ifndef TANDEM_ROUTER_HTTP_HTTP_RESPONSE_SINK_H_
#define TANDEM_ROUTER_HTTP_HTTP_RESPONSE_SINK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/status.h"
#include "router/http/openai_error.h"
#include "router/http/openai_response.h"
#include "router/response_sink.h"

namespace tandem {

// The connection side of a streaming response. Thread-safe: called from the runner's thread.
class StreamOutput {
 public:
  virtual ~StreamOutput() = default;
  // Appends `data` to the streamed body (the first call sends the 200 header first).
  virtual void SendStreamData(std::string data) = 0;
  // Drops the connection at once (nothing more can be delivered).
  virtual void CloseConnection() = 0;
};

// What is left to send once the runner returned.
struct FinalResponse {
  enum class Kind {
    kNothing,     // the client is gone: close the connection
    kStreamTail,  // streaming, header sent: append `body` (events) and end the chunked body
    kComplete,    // a whole response: `status` with the JSON `body`
  };
  Kind kind = Kind::kNothing;
  int status = 200;
  std::string body;
  bool retry_after = false;  // 429 / 503: add Retry-After
};

class HttpResponseSink : public ResponseSink {
 public:
  // Calls into `output` are skipped once it is gone. `tokenizer` must outlive the sink.
  HttpResponseSink(OpenAiOutputOptions options, const Tokenizer& tokenizer, std::string id,
                   std::string model, int64_t created, std::weak_ptr<StreamOutput> output,
                   int64_t max_queued_bytes);

  // ResponseSink (the request's flow, one call at a time).
  void Write(const v1::GenerateResponse& response, WriteDone done) override;
  bool ClientGone() override;
  void Abort() override;

  // After Run returned `status` (runner thread): what the connection still has to send.
  FinalResponse Finish(const grpc::Status& status);

  // Connection side (any thread).
  void BytesWritten(int64_t n);
  void ClientClosed();
  // The server is shutting down: the client counts as gone (the runner cancels the request) and
  // the connection is dropped.
  void Cancel();

  bool streaming() const { return options_.stream; }
  int64_t queued_bytes() const;

 private:
  void CloseOutput();
  WriteDone TakeBlockedWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const OpenAiOutputOptions options_;
  const int64_t max_queued_bytes_;
  const std::weak_ptr<StreamOutput> output_;
  // The request's flow only (one call at a time).
  OpenAiResponseFormatter formatter_;
  bool stream_started_ = false;

  std::atomic<bool> gone_{false};
  mutable absl::Mutex mu_;
  int64_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  // The write that took queued_ over max_queued_bytes_: done once the connection catches up.
  WriteDone blocked_write_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_HTTP_RESPONSE_SINK_H_
