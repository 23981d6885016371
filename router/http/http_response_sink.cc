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

void HttpResponseSink::Write(const v1::GenerateResponse& response, WriteDone done) {
  if (gone_.load()) {
    done(false);
    return;
  }
  if (!options_.stream) {
    formatter_.Add(response);
    bool ok = false;
    {
      absl::MutexLock lock(&mu_);
      ok = !aborted_;
    }
    done(ok);
    return;
  }
  std::string data;
  for (const auto& chunk : formatter_.StreamChunks(response)) data += SseEvent(chunk);
  if (data.empty()) {
    done(true);
    return;
  }
  bool refused = false;
  bool room = false;
  {
    absl::MutexLock lock(&mu_);
    refused = aborted_ || gone_.load();
    if (!refused) {
      queued_ += static_cast<int64_t>(data.size());
      stream_started_ = true;
      room = queued_ <= max_queued_bytes_;
      // Over the limit: this write completes once the connection has written enough.
      if (!room) blocked_write_ = std::move(done);
    }
  }
  if (refused) {
    done(false);
    return;
  }
  if (std::shared_ptr<StreamOutput> out = output_.lock()) out->SendStreamData(std::move(data));
  if (room) done(true);
}

HttpResponseSink::WriteDone HttpResponseSink::TakeBlockedWrite() {
  WriteDone blocked = std::move(blocked_write_);
  blocked_write_ = nullptr;
  return blocked;
}

void HttpResponseSink::CloseOutput() {
  if (std::shared_ptr<StreamOutput> out = output_.lock()) out->CloseConnection();
}

bool HttpResponseSink::ClientGone() { return gone_.load(); }

void HttpResponseSink::Abort() {
  bool close = false;
  WriteDone blocked;
  {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
    // A stream the client stopped reading: nothing more can reach it.
    close = options_.stream && queued_ > 0;
    blocked = TakeBlockedWrite();
  }
  if (close) CloseOutput();
  if (blocked != nullptr) blocked(false);
}

void HttpResponseSink::Cancel() {
  WriteDone blocked;
  {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
    gone_ = true;
    blocked = TakeBlockedWrite();
  }
  CloseOutput();
  if (blocked != nullptr) blocked(false);
}

void HttpResponseSink::ClientClosed() {
  WriteDone blocked;
  {
    absl::MutexLock lock(&mu_);
    gone_ = true;
    blocked = TakeBlockedWrite();
  }
  if (blocked != nullptr) blocked(false);
}

void HttpResponseSink::BytesWritten(int64_t n) {
  WriteDone blocked;
  {
    absl::MutexLock lock(&mu_);
    queued_ -= n;
    if (queued_ <= max_queued_bytes_) blocked = TakeBlockedWrite();
  }
  if (blocked != nullptr) blocked(true);
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
