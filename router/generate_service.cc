#include "router/generate_service.h"

#include <atomic>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "router/request_builder.h"

namespace tandem {
namespace {

// One Generate call: the request's ResponseSink over the call's stream. Deletes itself in OnDone,
// which gRPC calls once Finish completed; the request ends (and stops touching the sink) before
// Finish is called.
class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse>,
                              public ResponseSink {
 public:
  explicit GenerateReactor(grpc::CallbackServerContext* context) : context_(context) {}

  // ResponseSink.
  void Write(const v1::GenerateResponse& response, WriteDone done) override {
    if (cancelled_.load()) {
      done(false);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      response_ = response;
      write_done_ = std::move(done);
    }
    StartWrite(&response_);
  }
  bool ClientGone() override { return cancelled_.load(); }
  void Abort() override { context_->TryCancel(); }

  // gRPC reactions.
  void OnWriteDone(bool ok) override {
    WriteDone done;
    {
      absl::MutexLock lock(&mu_);
      done = std::move(write_done_);
      write_done_ = nullptr;
    }
    if (!ok) cancelled_ = true;
    if (done != nullptr) done(ok);
  }
  void OnCancel() override { cancelled_ = true; }
  void OnDone() override { delete this; }

 private:
  grpc::CallbackServerContext* const context_;
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  v1::GenerateResponse response_ ABSL_GUARDED_BY(mu_);
  WriteDone write_done_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* GenerateService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  auto* reactor = new GenerateReactor(context);
  if (keys_ != nullptr && keys_->enabled()) {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("authorization");
    const std::string_view value = it == metadata.end()
                                       ? std::string_view()
                                       : std::string_view(it->second.data(), it->second.size());
    if (!keys_->Authorizes(value)) {
      runner_->CountRefused(RequestApi::kGrpc, grpc::StatusCode::UNAUTHENTICATED);
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                   "missing or invalid API key: send metadata \"authorization: "
                                   "Bearer KEY\""));
      return reactor;
    }
  }
  RunOptions options;
  options.api = RequestApi::kGrpc;
  options.deadline = absl::FromChrono(context->deadline());
  // The router's id, in the response headers: error messages and the router's logs name it.
  options.request_id = MakeRequestId();
  context->AddInitialMetadata("x-request-id", options.request_id);
  runner_->Start(*request, options, reactor, [reactor, context](grpc::Status status) {
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      // gRPC's retry pushback: a client with a retry policy waits this long.
      context->AddTrailingMetadata("grpc-retry-pushback-ms",
                                   std::to_string(RequestRunner::kRetryAfterSeconds * 1000));
    }
    reactor->Finish(std::move(status));
  });
  return reactor;
}

}  // namespace tandem
