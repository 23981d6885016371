#include "common/transport/cuda/nccl_connect.h"

#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {

NcclConnectHook GrpcNcclConnectHook(std::shared_ptr<grpc::ChannelCredentials> credentials,
                                    grpc::ChannelArguments args) {
  return [credentials, args](const std::string& address, const std::string& nccl_unique_id,
                             uint64_t writer_incarnation, absl::Time deadline) -> absl::Status {
    std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(address, credentials, args);
    std::unique_ptr<v1::DecodeNode::Stub> stub = v1::DecodeNode::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    v1::ConnectKvRequest request;
    request.set_nccl_unique_id(nccl_unique_id);
    request.set_prefill_incarnation(writer_incarnation);
    v1::ConnectKvResponse response;
    const grpc::Status s = stub->ConnectKv(&context, request, &response);
    if (s.ok()) return absl::OkStatus();
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("ConnectKv at ", address, ": ", s.error_message()));
  };
}

}  // namespace tandem
