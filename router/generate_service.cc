#include "router/generate_service.h"

#include "absl/time/clock.h"
#include "router/request_builder.h"

namespace tandem {
namespace {

class GrpcStreamSink final : public ResponseSink {
 public:
  GrpcStreamSink(grpc::ServerContext* context, grpc::ServerWriter<v1::GenerateResponse>* writer)
      : context_(context), writer_(writer) {}

  bool Write(const v1::GenerateResponse& response) override { return writer_->Write(response); }
  bool ClientGone() override { return context_->IsCancelled(); }
  void Abort() override { context_->TryCancel(); }

 private:
  grpc::ServerContext* const context_;
  grpc::ServerWriter<v1::GenerateResponse>* const writer_;
};

}  // namespace

grpc::Status GenerateService::Generate(grpc::ServerContext* context,
                                       const v1::GenerateRequest* request,
                                       grpc::ServerWriter<v1::GenerateResponse>* writer) {
  if (keys_ != nullptr && keys_->enabled()) {
    const auto& metadata = context->client_metadata();
    auto it = metadata.find("authorization");
    const std::string_view value = it == metadata.end()
                                       ? std::string_view()
                                       : std::string_view(it->second.data(), it->second.size());
    if (!keys_->Authorizes(value)) {
      runner_->CountRefused(RequestApi::kGrpc, grpc::StatusCode::UNAUTHENTICATED);
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "missing or invalid API key: send metadata \"authorization: Bearer "
                          "KEY\"");
    }
  }
  GrpcStreamSink sink(context, writer);
  RunOptions options;
  options.api = RequestApi::kGrpc;
  options.deadline = absl::FromChrono(context->deadline());
  // The router's id, in the response headers: error messages and the router's logs name it.
  options.request_id = MakeRequestId();
  context->AddInitialMetadata("x-request-id", options.request_id);
  grpc::Status status = runner_->Run(*request, options, sink);
  if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
    // gRPC's retry pushback: a client with a retry policy waits this long.
    context->AddTrailingMetadata("grpc-retry-pushback-ms",
                                 std::to_string(RequestRunner::kRetryAfterSeconds * 1000));
  }
  return status;
}

}  // namespace tandem
