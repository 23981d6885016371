// The KV transport a node runs (--kv-transport): "auto" picks by backend — UCX (ucp RMA into a host
// pool) for the cpu backend; for the cuda backend's device pool, UCX wrapped in CudaKvTransport
// (CUDA IPC between processes on one host, staged through pinned host memory between hosts).
// "nccl" (cuda backend only) runs NcclKvTransport: a decode node publishes --kv-advertise (its
// gRPC address as prefill nodes reach it) for DecodeNode.ConnectKv; a prefill node connects through
// that RPC. Prefill and decode nodes of one cluster must run the same transport.
#ifndef TANDEM_COMMON_SERVING_NODE_KV_TRANSPORT_H_
#define TANDEM_COMMON_SERVING_NODE_KV_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/serving/node_engine.h"
#include "common/tls/grpc_tls.h"
#include "common/transport/handoff_auth.h"
#include "common/transport/kv_transport.h"
#include "common/util/cli_flags.h"

namespace tandem {

struct NodeKvTransportOptions {
  std::string kind = "auto";  // --kv-transport: auto, ucx, cuda or nccl
  std::string advertise;      // --kv-advertise: nccl on a decode node
  bool owner = false;         // a decode node (receives KV) rather than a prefill node
  std::string name;           // shows up in UCX logs ("tandem-decode")
  // An owner that also writes into other nodes' pools (tandem-decode --serve-prefill): the nccl
  // transport gets both the owner's address and the writer's connect hook. Set before
  // AddNodeKvTransportFlags on a binary that may write, so that --node-tls-* exist. (ucx and
  // cuda transports are owner and writer in one process whatever the flag: a decode node already
  // writes when it moves a sequence's KV to another node.)
  bool writer = false;
  // --kv-interface: the network interfaces UCX may use (UCX_NET_DEVICES, e.g. "eth0" or
  // "mlx5_0:1,eth0"). "": the interface that owns --listen's address when that is not a
  // wildcard (so UCX listens nowhere else), else UCX's own choice (UCX_NET_DEVICES, or all).
  std::string interface;
  std::string listen;  // --listen's HOST:PORT, for the default above
  // --kv-port-range LO-HI: the TCP ports UCX's tcp transport listens on (UCX_TCP_PORT_RANGE), so
  // a NetworkPolicy can name them; "": any port the kernel picks.
  std::string port_range;
  // --cluster-secret-file: the secret every decode and prefill node of the cluster shares, which
  // authenticates KV handoffs and completions (common/transport/handoff_auth.h).
  std::string cluster_secret_file;
  // --insecure-no-handoff-auth: run without it (any client that reaches a node can then direct
  // where KV is written); for throwaway experiments only.
  bool insecure_no_handoff_auth = false;
  // --tls-* (this node's gRPC server) and --node-tls-* (a prefill node dialling a decode node's
  // ConnectKv for the nccl transport).
  TlsServerFiles tls;
  TlsClientFiles node_tls;
};

// Declares --kv-transport, --kv-advertise, --kv-interface, --kv-port-range,
// --cluster-secret-file and --insecure-no-handoff-auth, then the --tls-* flags (and --node-tls-*
// unless an `owner` that is not a `writer`), each in its own --help section.
void AddNodeKvTransportFlags(FlagSet& flags, NodeKvTransportOptions* options);

// The handoff authenticator from --cluster-secret-file; null with --insecure-no-handoff-auth
// (a warning is logged) or, when not `required`, with neither flag. InvalidArgument with both, or
// with neither when `required`.
absl::StatusOr<std::shared_ptr<const HandoffAuthenticator>> LoadHandoffAuth(
    const NodeKvTransportOptions& options, bool required);

// The interface whose address is `host` ("" when `host` is a wildcard, a name, or on no interface).
std::string InterfaceOfAddress(const std::string& host);

absl::StatusOr<std::unique_ptr<KvTransport>> CreateNodeKvTransport(
    const NodeEngineOptions& engine, const NodeKvTransportOptions& options);

// The hooks that hand the backend's pool to `transport` (NodeEngine::Create's second argument).
KvPoolHooks TransportPoolHooks(KvTransport* transport);

// A decode node's ConnectKv handler when `transport` is the nccl transport, else null.
std::function<absl::Status(std::string_view, uint64_t)> NcclAcceptor(KvTransport* transport);

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_NODE_KV_TRANSPORT_H_
