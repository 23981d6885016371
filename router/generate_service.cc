#include "router/generate_service.h"

#include "absl/time/clock.h"

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
  GrpcStreamSink sink(context, writer);
  RunOptions options;
  options.api = RequestApi::kGrpc;
  options.deadline = absl::FromChrono(context->deadline());
  return runner_->Run(*request, options, sink);
}

}  // namespace tandem
