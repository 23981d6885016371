#include "decode_node/kv_export_call.h"

#include <utility>

#include "common/serving/proto_convert.h"
#include "decode_node/decode_service.h"

namespace tandem {

KvExportCall::KvExportCall(DecodeService* service, v1::ExportKvResponse* response)
    : service_(service),
      response_(response),
      executor_(SerialExecutor::Create(&service->workers_)) {}

grpc::ServerUnaryReactor* KvExportCall::Start(DecodeService* service,
                                              const v1::ExportKvRequest* request,
                                              v1::ExportKvResponse* response) {
  std::shared_ptr<KvExportCall> call(new KvExportCall(service, response));
  call->self_ = call;
  ++service->open_calls_;
  call->Post([request](KvExportCall& c) { c.Begin(*request); });
  return call.get();
}

// --- Reactions: each posts to the executor. ---

void KvExportCall::OnCancel() {
  // Nothing to stop: the request stays paused, and the writer's deadline bounds the transfer.
}

void KvExportCall::OnDone() {
  --service_->open_calls_;
  Post([](KvExportCall& c) { c.self_.reset(); });
}

// --- Event handlers. ---

void KvExportCall::Begin(const v1::ExportKvRequest& request) {
  received_at_ = service_->options_.clock->Now();
  // The writer reports once the engine let go of the blocks and the completion was delivered.
  absl::Status started = service_->StartExport(
      request, received_at_, [weak = weak_from_this()](absl::StatusOr<KvWriteResult> result) {
        if (std::shared_ptr<KvExportCall> call = weak.lock()) {
          call->Post([r = std::move(result)](KvExportCall& c) mutable {
            c.OnWriterFinished(std::move(r));
          });
        }
      });
  if (!started.ok()) return End(started);
  stage_ = Stage::kAwaiting;
}

void KvExportCall::OnWriterFinished(absl::StatusOr<KvWriteResult> result) {
  if (stage_ != Stage::kAwaiting) return;
  End(result);
}

void KvExportCall::End(const absl::StatusOr<KvWriteResult>& result) {
  DecodeService& s = *service_;
  stage_ = Stage::kDone;
  DecodeMetrics* metrics = s.options_.metrics;
  if (!result.ok()) {
    if (metrics != nullptr) metrics->KvExportFailed();
    Finish(ToGrpcStatus(DecodeService::ExportError(result.status())));
    return;
  }
  response_->set_bytes_transferred(result->bytes);
  response_->set_num_writes(result->num_writes);
  response_->set_num_blocks_written(result->num_blocks_written);
  response_->set_num_blocks_skipped(result->num_blocks_skipped);
  response_->set_transfer_us(absl::ToInt64Microseconds(s.options_.clock->Now() - received_at_));
  if (metrics != nullptr) metrics->KvExportSucceeded(result->bytes);
  Finish(grpc::Status::OK);
}

}  // namespace tandem
