#include "router/http/http_response_sink.h"

#include <utility>
#include <vector>

namespace tandem {

HttpResponseSink::HttpResponseSink(OpenAiOutputOptions options, const Tokenizer& tokenizer,
                                   std::string id, std::string model, int64_t created,
                                   std::weak_ptr<StreamOutput> output, int64_t max_queued_bytes)
    : options_(options),
      max_queued_bytes_(max_queued_bytes),
      output_(std::move(output)),
      formatter_(std::move(options), tokenizer, std::move(id), std::move(model), created) {}

bool HttpResponseSink::Write(const v1::GenerateResponse& response) {
  if (gone_.load()) return false;
  if (!options_.stream) {
    formatter_.Add(response);
    absl::MutexLock lock(&mu_);
    return !aborted_;
  }
  std::string data;
  for (const auto& chunk : formatter_.StreamChunks(response)) data += SseEvent(chunk);
  if (data.empty()) return true;
  {
    absl::MutexLock lock(&mu_);
    auto writable = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return queued_ <= max_queued_bytes_ || aborted_ || gone_.load();
    };
    mu_.Await(absl::Condition(&writable));
    if (aborted_ || gone_.load()) return false;
    queued_ += static_cast<int64_t>(data.size());
    stream_started_ = true;
  }
  if (std::shared_ptr<StreamOutput> out = output_.lock()) out->SendStreamData(std::move(data));
  return true;
}

void HttpResponseSink::CloseOutput() {
  if (std::shared_ptr<StreamOutput> out = output_.lock()) out->CloseConnection();
}

bool HttpResponseSink::ClientGone() { return gone_.load(); }

void HttpResponseSink::Abort() {
  bool close = false;
  {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
    // A stream the client stopped reading: nothing more can reach it.
    close = options_.stream && queued_ > 0;
  }
  if (close) CloseOutput();
}

void HttpResponseSink::Cancel() {
  {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
    gone_ = true;
  }
  CloseOutput();
}

void HttpResponseSink::ClientClosed() {
  absl::MutexLock lock(&mu_);  // wakes a Write waiting for room
  gone_ = true;
}

void HttpResponseSink::BytesWritten(int64_t n) {
  absl::MutexLock lock(&mu_);
  queued_ -= n;
}

int64_t HttpResponseSink::queued_bytes() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

FinalResponse HttpResponseSink::Finish(const grpc::Status& status) {
  FinalResponse out;
  if (gone_.load()) return out;  // kNothing
  if (options_.stream && (stream_started_ || status.ok())) {
    out.kind = FinalResponse::Kind::kStreamTail;
    if (!status.ok()) {
      // An error after the stream began: one event carrying the error object, then [DONE] —
      // what vLLM's completion and chat stream generators do (they yield the error event and
      // fall through to their final "data: [DONE]").
      out.body = SseEvent(ErrorFromGrpcStatus(status).ToJson());
    }
    out.body += kSseDone;
    return out;
  }
  out.kind = FinalResponse::Kind::kComplete;
  if (status.ok()) {
    out.body = DumpJson(formatter_.Final());
    return out;
  }
  const OpenAiError error = ErrorFromGrpcStatus(status);
  out.status = error.http_status;
  out.retry_after = error.retry_later();
  out.body = DumpJson(error.ToJson());
  return out;
}

}  // namespace tandem
