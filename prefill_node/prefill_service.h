// tandem-prefill's gRPC service (tandem.v1.PrefillNode): computes a prompt's KV in chunks, writes
// each finished piece straight into the blocks a decode node reserved (KvBlockWriter over the KV
// transport) while the next chunk computes, samples the first token, sends the completion to the
// decode node, then answers. Also publishes the prefix cache's content for prefix-aware routing.
#ifndef TANDEM_PREFILL_NODE_PREFILL_SERVICE_H_
#define TANDEM_PREFILL_NODE_PREFILL_SERVICE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/engine/engine.h"
#include "common/serving/node_requests.h"
#include "common/transport/handoff_auth.h"
#include "common/transport/handoff_gate.h"
#include "common/transport/kv_transport.h"
#include "common/util/clock.h"
#include "prefill_node/prefill_metrics.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem {

struct PrefillServiceOptions {
  std::string model_name;
  // How often WatchKvEvents looks for prefix-cache changes.
  absl::Duration kv_events_interval = absl::Milliseconds(100);
  // Where each Prefill call's times, KV bytes and failures are counted; borrowed; may be null.
  PrefillMetrics* metrics = nullptr;
  // Checks every handoff before anything is written for it (common/transport/handoff_gate.h) and
  // signs completions; borrowed; required.
  HandoffGate* handoff_gate = nullptr;
  // Signs completion notices; null: unsigned (--insecure-no-handoff-auth).
  std::shared_ptr<const HandoffAuthenticator> handoff_auth;
  // Deadlines, waits, the handoff gate's time and the timings reported are read on it (borrowed).
  Clock* clock = Clock::Real();
};

class PrefillService final : public v1::PrefillNode::Service {
 public:
  // `engine` and `transport` are borrowed.
  PrefillService(Engine* engine, KvTransport* transport, PrefillServiceOptions options);

  grpc::Status Prefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override;
  grpc::Status Cancel(grpc::ServerContext* context, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override;
  grpc::Status GetLoad(grpc::ServerContext* context, const v1::LoadRequest* request,
                       v1::NodeLoad* response) override;
  grpc::Status WatchKvEvents(grpc::ServerContext* context, const v1::WatchKvEventsRequest* request,
                             grpc::ServerWriter<v1::KvEvents>* writer) override;

 private:
  // Prefill without the metrics' failure count: the call's status, and the reason when it failed.
  grpc::Status RunPrefill(grpc::ServerContext* context, const v1::PrefillRequest* request,
                          v1::PrefillResponse* response, absl::Time received_at,
                          KvTransferFailure* failure);

  Engine* const engine_;
  KvTransport* const transport_;
  const PrefillServiceOptions options_;
  RouterRequestIds router_ids_;
};

}  // namespace tandem

#endif  // TANDEM_PREFILL_NODE_PREFILL_SERVICE_H_
