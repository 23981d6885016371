#include "router/node_client.h"

#include <memory>
#include <utility>

namespace tandem {

GrpcNodeClient::GrpcNodeClient(const std::shared_ptr<grpc::Channel>& channel, bool is_decode)
    : is_decode_(is_decode),
      decode_(v1::DecodeNode::NewStub(channel)),
      prefill_(v1::PrefillNode::NewStub(channel)) {}

std::unique_ptr<DecodeEventReader> GrpcNodeClient::Reserve(grpc::ClientContext* ctx,
                                                           const v1::ReserveRequest& request) {
  return decode_->Reserve(ctx, request);
}

std::unique_ptr<DecodeEventReader> GrpcNodeClient::Generate(
    grpc::ClientContext* ctx, const v1::NodeGenerateRequest& request) {
  return decode_->Generate(ctx, request);
}

void GrpcNodeClient::Prefill(grpc::ClientContext* ctx, const v1::PrefillRequest* request,
                             v1::PrefillResponse* response, Done done) {
  prefill_->async()->Prefill(ctx, request, response, std::move(done));
}

void GrpcNodeClient::Cancel(grpc::ClientContext* ctx, const v1::CancelRequest* request,
                            v1::CancelResponse* response, Done done) {
  if (is_decode_) {
    decode_->async()->Cancel(ctx, request, response, std::move(done));
  } else {
    prefill_->async()->Cancel(ctx, request, response, std::move(done));
  }
}

}  // namespace tandem
