// The public Generation service (tandem/v1/generate.proto) on the router: validate and tokenize
// (request_builder), place (placement over the node pool), then run the request
//   disaggregated: DecodeNode.Reserve → its KvHandoff → PrefillNode.Prefill(tokens, sampling,
//                  handoff) while D's token stream is read;
//   local prefill / colocated: DecodeNode.Generate;
// and stream tokens back with UTF-8-safe incremental text and stop strings (output_text).
//
// Failures before any token reached the client cancel what the attempt holds and retry the whole
// request on another pair, up to max_retries; after a token was sent the stream fails with the
// node's status. A client that goes away, a stop string and an abandoned attempt cancel the node
// calls and send Cancel RPCs. Every decision is counted (RouterCounters).
#ifndef TANDEM_ROUTER_GENERATE_SERVICE_H_
#define TANDEM_ROUTER_GENERATE_SERVICE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "router/call_watchdog.h"
#include "router/node_pool.h"
#include "router/placement.h"
#include "router/request_builder.h"
#include "router/router_counters.h"
#include "router/router_options.h"
#include "router/served_model.h"
#include "tandem/v1/generate.grpc.pb.h"

namespace tandem {

class GenerateService final : public v1::Generation::Service {
 public:
  // `pool` and `counters` must outlive the service.
  GenerateService(std::shared_ptr<const ServedModel> model, NodePool* pool,
                  const RouterOptions& options, RouterCounters* counters);
  // Waits (bounded) for Cancel RPCs still in flight.
  ~GenerateService() override;

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;

 private:
  struct Chosen;
  struct ClientStream;
  struct AttemptResult;

  absl::StatusOr<Chosen> Place(const RouterRequest& request,
                               const std::vector<std::string>& failed_nodes);
  AttemptResult RunDisaggregated(const Chosen& chosen, const std::string& node_request_id,
                                 CallGuard& guard, ClientStream& stream);
  AttemptResult RunLocal(const Chosen& chosen, const std::string& node_request_id, CallGuard& guard,
                         ClientStream& stream);
  // Best-effort Cancel RPC; does not wait.
  void SendCancel(const std::shared_ptr<Node>& node, const std::string& request_id);

  const std::shared_ptr<const ServedModel> model_;
  NodePool* const pool_;
  const RouterOptions options_;
  RouterCounters* const counters_;
  const Placer placer_;
  CallWatchdog watchdog_;

  absl::Mutex cancels_mu_;
  int cancels_in_flight_ ABSL_GUARDED_BY(cancels_mu_) = 0;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_GENERATE_SERVICE_H_
