// How an NcclKvTransport writer reaches an owner to open a communicator: a hook that delivers the
// NCCL unique id, and the hook the nodes use, which calls the owner's DecodeNode.ConnectKv over
// gRPC. Pure C++ (no CUDA): built and tested everywhere.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_NCCL_CONNECT_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_NCCL_CONNECT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace tandem {

// Delivers a new communicator's unique id to the owner at `address` and returns once the owner
// accepted it (the owner starts its side and answers; it does not wait for the communicator).
// Called on a connection thread of the writer.
using NcclConnectHook =
    std::function<absl::Status(const std::string& address, const std::string& nccl_unique_id,
                               uint64_t writer_incarnation, absl::Time deadline)>;

// Calls tandem.v1.DecodeNode/ConnectKv at `address` (host:port, over `credentials` with `args`:
// TLS when the node runs it) with the id and the writer's incarnation, bounded by `deadline`. The
// RPC's status, as an absl::Status with the same code (Unavailable when the owner cannot be
// reached).
NcclConnectHook GrpcNcclConnectHook(std::shared_ptr<grpc::ChannelCredentials> credentials,
                                    grpc::ChannelArguments args);

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_NCCL_CONNECT_H_
