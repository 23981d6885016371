// The calls the request path makes on one node, behind an interface (one implementation over the
// generated gRPC stubs, GrpcNodeClient; fakes in tests/router/), so the RequestRunner is tested in
// process without gRPC servers. Health checks, load reports and KV events stay on the stubs: they
// belong to the node pool, not to a request.
//
// Every call is asynchronous (gRPC's callback API: no thread waits on a call) and takes a
// grpc::ClientContext the caller owns, keeps alive until the call's end is reported, and may
// cancel (TryCancel) from any thread; the call ends soon after with CANCELLED.
#ifndef TANDEM_ROUTER_NODE_CLIENT_H_
#define TANDEM_ROUTER_NODE_CLIENT_H_

#include <functional>
#include <memory>

#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "grpcpp/support/status.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {

// Receives one decode node stream's events (Reserve, Generate), on gRPC's threads: OnEvent for
// each event, then OnDone once, last. After OnEvent the next event is read only when the receiver
// calls DecodeStream::ReadNext (flow control: a slow client slows the node's stream).
class DecodeStreamReceiver {
 public:
  virtual ~DecodeStreamReceiver() = default;
  virtual void OnEvent(const v1::DecodeEvent& event) = 0;
  virtual void OnDone(const grpc::Status& status) = 0;
};

// A started decode stream. Its receiver is held until OnDone; cancel it through its context.
class DecodeStream {
 public:
  virtual ~DecodeStream() = default;
  // Reads the next event (once per OnEvent, never after StopReading).
  virtual void ReadNext() = 0;
  // The receiver reads no more (it cancels the context, or the stream ended): OnDone may come.
  // Safe to call more than once, from any thread.
  virtual void StopReading() = 0;
};

class NodeClient {
 public:
  // gRPC's own callback type (it copies it).
  using Done = std::function<void(grpc::Status)>;

  virtual ~NodeClient() = default;

  // DecodeNode.Reserve: the first event is the handoff, then the tokens. Reading starts at once.
  virtual std::shared_ptr<DecodeStream> StartReserve(
      grpc::ClientContext* ctx, const v1::ReserveRequest& request,
      std::shared_ptr<DecodeStreamReceiver> receiver) = 0;
  // DecodeNode.Generate: prefill and decode on the decode node.
  virtual std::shared_ptr<DecodeStream> StartGenerate(
      grpc::ClientContext* ctx, const v1::NodeGenerateRequest& request,
      std::shared_ptr<DecodeStreamReceiver> receiver) = 0;
  // PrefillNode.Prefill, asynchronous: `done` runs once, on another thread (or this one when the
  // call fails at once). `request` and `response` must outlive the call.
  virtual void Prefill(grpc::ClientContext* ctx, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response, Done done) = 0;
  // Cancel on this node (either role), asynchronous like Prefill.
  virtual void Cancel(grpc::ClientContext* ctx, const v1::CancelRequest* request,
                      v1::CancelResponse* response, Done done) = 0;
  // Live KV migration on a decode node, asynchronous like Prefill: DecodeNode.PauseForMigration
  // (`resume` false) or ResumePaused (`resume` true), and DecodeNode.ExportKv.
  virtual void PauseOrResume(grpc::ClientContext* ctx, bool resume,
                             const v1::MigrationRequest* request, v1::MigrationResponse* response,
                             Done done) = 0;
  virtual void ExportKv(grpc::ClientContext* ctx, const v1::ExportKvRequest* request,
                        v1::ExportKvResponse* response, Done done) = 0;
};

// NodeClient over a channel's generated stubs.
class GrpcNodeClient : public NodeClient {
 public:
  // `is_decode` picks the service Cancel goes to.
  GrpcNodeClient(const std::shared_ptr<grpc::Channel>& channel, bool is_decode);

  std::shared_ptr<DecodeStream> StartReserve(
      grpc::ClientContext* ctx, const v1::ReserveRequest& request,
      std::shared_ptr<DecodeStreamReceiver> receiver) override;
  std::shared_ptr<DecodeStream> StartGenerate(
      grpc::ClientContext* ctx, const v1::NodeGenerateRequest& request,
      std::shared_ptr<DecodeStreamReceiver> receiver) override;
  void Prefill(grpc::ClientContext* ctx, const v1::PrefillRequest* request,
               v1::PrefillResponse* response, Done done) override;
  void Cancel(grpc::ClientContext* ctx, const v1::CancelRequest* request,
              v1::CancelResponse* response, Done done) override;
  void PauseOrResume(grpc::ClientContext* ctx, bool resume, const v1::MigrationRequest* request,
                     v1::MigrationResponse* response, Done done) override;
  void ExportKv(grpc::ClientContext* ctx, const v1::ExportKvRequest* request,
                v1::ExportKvResponse* response, Done done) override;

 private:
  const bool is_decode_;
  std::unique_ptr<v1::DecodeNode::Stub> decode_;
  std::unique_ptr<v1::PrefillNode::Stub> prefill_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_NODE_CLIENT_H_
