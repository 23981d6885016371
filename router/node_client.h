// The calls the request path makes on one node, behind an interface (one implementation over the
// generated gRPC stubs, GrpcNodeClient; fakes in tests/router/), so the RequestRunner is tested in
// process without gRPC servers. Health checks, load reports and KV events stay on the stubs: they
// belong to the node pool, not to a request.
//
// Every call takes a grpc::ClientContext the caller owns and may cancel (TryCancel) from any
// thread; the call ends soon after with CANCELLED.
#ifndef TANDEM_ROUTER_NODE_CLIENT_H_
#define TANDEM_ROUTER_NODE_CLIENT_H_

#include <functional>
#include <memory>

#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {

// A decode node's event stream (Reserve, Generate), read by one thread.
using DecodeEventReader = grpc::ClientReaderInterface<v1::DecodeEvent>;

class NodeClient {
 public:
  // gRPC's own callback type (it copies it).
  using Done = std::function<void(grpc::Status)>;

  virtual ~NodeClient() = default;

  // DecodeNode.Reserve: the first event is the handoff, then the tokens.
  virtual std::unique_ptr<DecodeEventReader> Reserve(grpc::ClientContext* ctx,
                                                     const v1::ReserveRequest& request) = 0;
  // DecodeNode.Generate: prefill and decode on the decode node.
  virtual std::unique_ptr<DecodeEventReader> Generate(grpc::ClientContext* ctx,
                                                      const v1::NodeGenerateRequest& request) = 0;
  // PrefillNode.Prefill, asynchronous: `done` runs once, on another thread (or this one when the
  // call fails at once). `request` and `response` must outlive the call.
  virtual void Prefill(grpc::ClientContext* ctx, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response, Done done) = 0;
  // Cancel on this node (either role), asynchronous like Prefill.
  virtual void Cancel(grpc::ClientContext* ctx, const v1::CancelRequest* request,
                      v1::CancelResponse* response, Done done) = 0;
};

// NodeClient over a channel's generated stubs.
class GrpcNodeClient : public NodeClient {
 public:
  // `is_decode` picks the service Cancel goes to.
  GrpcNodeClient(const std::shared_ptr<grpc::Channel>& channel, bool is_decode);

  std::unique_ptr<DecodeEventReader> Reserve(grpc::ClientContext* ctx,
                                             const v1::ReserveRequest& request) override;
  std::unique_ptr<DecodeEventReader> Generate(grpc::ClientContext* ctx,
                                              const v1::NodeGenerateRequest& request) override;
  void Prefill(grpc::ClientContext* ctx, const v1::PrefillRequest* request,
               v1::PrefillResponse* response, Done done) override;
  void Cancel(grpc::ClientContext* ctx, const v1::CancelRequest* request,
              v1::CancelResponse* response, Done done) override;

 private:
  const bool is_decode_;
  std::unique_ptr<v1::DecodeNode::Stub> decode_;
  std::unique_ptr<v1::PrefillNode::Stub> prefill_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_NODE_CLIENT_H_
