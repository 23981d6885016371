// One ExportKv call of tandem-decode (decode_service.h; live KV migration) as a state machine that
// no thread waits on: a request paused here has its KV written into another decode node's
// reservation by a KvBlockWriter, as a prefill node writes a prompt's. Its events arrive on other
// threads and are handled one at a time on its SerialExecutor, on the service's few worker
// threads, so its handlers hold no lock and none of them blocks:
//   - the KV writer's result (engine or transport thread; it only posts here);
//   - the client going away (gRPC's callback threads): noted, nothing stopped. The request stays
//     paused here whatever happens to the call, and the writer's deadline (the handoff's lease)
//     bounds the transfer.
//
//   stage       what it waits for                          moved out by
//   kStarting   nothing: Begin runs (StartExport: the       refused → kDone; started →
//               handoff, the router id, the writer,         kAwaiting
//               Engine::ExportPaused)
//   kAwaiting   the writer's result                         the result → kDone (the response,
//                                                           or the error)
//   kDone       gRPC's OnDone: Finish was called; later reports are ignored.
// Every way out to kDone goes through End: the export counted (KvExportSucceeded / Failed),
// Finish with the status.
//
// Owns: nothing but its stage and when it began. Touches, through the service it belongs to
// (borrowed; it outlives every call): StartExport, the count of open calls, the metrics; the
// response gRPC gave it.
#ifndef TANDEM_DECODE_NODE_KV_EXPORT_CALL_H_
#define TANDEM_DECODE_NODE_KV_EXPORT_CALL_H_

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/handoff/kv_block_writer.h"
#include "common/util/serial_executor.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {

class DecodeService;

class KvExportCall final : public grpc::ServerUnaryReactor,
                           public std::enable_shared_from_this<KvExportCall> {
 public:
  enum class Stage { kStarting, kAwaiting, kDone };

  // Starts a call; the reactor lives until gRPC's OnDone (and any report still in flight).
  // `request` and `response` are gRPC's: valid until OnDone.
  static grpc::ServerUnaryReactor* Start(DecodeService* service, const v1::ExportKvRequest* request,
                                         v1::ExportKvResponse* response);

  // gRPC's reactions: each posts to the executor.
  void OnCancel() override;
  void OnDone() override;

 private:
  KvExportCall(DecodeService* service, v1::ExportKvResponse* response);

  // Event handlers (on the executor).
  void Begin(const v1::ExportKvRequest& request);
  void OnWriterFinished(absl::StatusOr<KvWriteResult> result);

  // The only way to kDone: the response filled from `result`, or its error.
  void End(const absl::StatusOr<KvWriteResult>& result);

  // Posts `handler` to run on the executor (on the service's workers) with this call alive.
  template <typename Handler>
  void Post(Handler handler) {
    executor_->Post(
        [self = shared_from_this(), handler = std::move(handler)]() mutable { handler(*self); });
  }

  DecodeService* const service_;
  v1::ExportKvResponse* const response_;  // gRPC's, until OnDone
  const std::shared_ptr<SerialExecutor> executor_;
  std::shared_ptr<KvExportCall> self_;  // until OnDone

  Stage stage_ = Stage::kStarting;
  absl::Time received_at_;
};

}  // namespace tandem

#endif  // TANDEM_DECODE_NODE_KV_EXPORT_CALL_H_
