// The KV transport a node runs, chosen by its backend: UCX (ucp RMA into a host pool) for the cpu
// backend; for the cuda backend's device pool, UCX wrapped in CudaKvTransport (CUDA IPC between
// processes on one host, staged through pinned host memory between hosts). Prefill and decode
// nodes of one cluster must run the same backend kind, so their transports match.
#ifndef TANDEM_COMMON_SERVING_NODE_KV_TRANSPORT_H_
#define TANDEM_COMMON_SERVING_NODE_KV_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/serving/node_engine.h"
#include "common/transport/kv_transport.h"

namespace tandem {

// `name` shows up in UCX logs ("tandem-decode").
absl::StatusOr<std::unique_ptr<KvTransport>> CreateNodeKvTransport(const NodeEngineOptions& options,
                                                                   const std::string& name);

// The hooks that hand the backend's pool to `transport` (NodeEngine::Create's second argument).
KvPoolHooks TransportPoolHooks(KvTransport* transport);

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_NODE_KV_TRANSPORT_H_
