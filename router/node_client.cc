#include "router/node_client.h"

#include <atomic>
#include <memory>
#include <utility>

namespace tandem {
namespace {

// One decode stream on gRPC's callback API. Owns itself from Start until OnDone. A hold keeps
// OnDone away until the receiver stops reading (or a read fails), so ReadNext never races it.
template <typename Request>
class GrpcDecodeStream final : public grpc::ClientReadReactor<v1::DecodeEvent>,
                               public DecodeStream,
                               public std::enable_shared_from_this<GrpcDecodeStream<Request>> {
 public:
  GrpcDecodeStream(const Request& request, std::shared_ptr<DecodeStreamReceiver> receiver)
      : request_(request), receiver_(std::move(receiver)) {}

  // `bind` binds this reactor to the call (the stub's async() method).
  template <typename Bind>
  void Start(Bind bind) {
    self_ = this->shared_from_this();
    bind(&request_, this);
    AddHold();
    StartRead(&event_);
    StartCall();
  }

  void ReadNext() override {
    if (holding_.load()) StartRead(&event_);
  }
  void StopReading() override {
    if (holding_.exchange(false)) RemoveHold();
  }

  void OnReadDone(bool ok) override {
    if (ok) {
      receiver_->OnEvent(event_);
    } else {
      StopReading();  // the stream is over; its status comes with OnDone
    }
  }
  void OnDone(const grpc::Status& status) override {
    std::shared_ptr<DecodeStreamReceiver> receiver = std::move(receiver_);
    receiver->OnDone(status);
    self_.reset();  // may end this object: the last line that touches it
  }

 private:
  const Request request_;
  v1::DecodeEvent event_;
  std::shared_ptr<DecodeStreamReceiver> receiver_;
  std::shared_ptr<GrpcDecodeStream> self_;
  std::atomic<bool> holding_{true};
};

}  // namespace

GrpcNodeClient::GrpcNodeClient(const std::shared_ptr<grpc::Channel>& channel, bool is_decode)
    : is_decode_(is_decode),
      decode_(v1::DecodeNode::NewStub(channel)),
      prefill_(v1::PrefillNode::NewStub(channel)) {}

std::shared_ptr<DecodeStream> GrpcNodeClient::StartReserve(
    grpc::ClientContext* ctx, const v1::ReserveRequest& request,
    std::shared_ptr<DecodeStreamReceiver> receiver) {
  auto stream =
      std::make_shared<GrpcDecodeStream<v1::ReserveRequest>>(request, std::move(receiver));
  stream->Start(
      [&](const v1::ReserveRequest* r, grpc::ClientReadReactor<v1::DecodeEvent>* reactor) {
        decode_->async()->Reserve(ctx, r, reactor);
      });
  return stream;
}

std::shared_ptr<DecodeStream> GrpcNodeClient::StartGenerate(
    grpc::ClientContext* ctx, const v1::NodeGenerateRequest& request,
    std::shared_ptr<DecodeStreamReceiver> receiver) {
  auto stream =
      std::make_shared<GrpcDecodeStream<v1::NodeGenerateRequest>>(request, std::move(receiver));
  stream->Start(
      [&](const v1::NodeGenerateRequest* r, grpc::ClientReadReactor<v1::DecodeEvent>* reactor) {
        decode_->async()->Generate(ctx, r, reactor);
      });
  return stream;
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

void GrpcNodeClient::PauseOrResume(grpc::ClientContext* ctx, bool resume,
                                   const v1::MigrationRequest* request,
                                   v1::MigrationResponse* response, Done done) {
  if (resume) {
    decode_->async()->ResumePaused(ctx, request, response, std::move(done));
  } else {
    decode_->async()->PauseForMigration(ctx, request, response, std::move(done));
  }
}

void GrpcNodeClient::ExportKv(grpc::ClientContext* ctx, const v1::ExportKvRequest* request,
                              v1::ExportKvResponse* response, Done done) {
  decode_->async()->ExportKv(ctx, request, response, std::move(done));
}

}  // namespace tandem
