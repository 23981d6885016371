#include "common/serving/node_kv_transport.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/tls/tls_flags.h"
#include "common/transport/kv_write_corruption.h"
#include "common/transport/ucx_transport.h"
#include "common/util/status_macros.h"
#include "spdlog/spdlog.h"
#if TANDEM_HAVE_CUDA
#include "common/transport/cuda/cuda_kv_transport.h"
#include "common/transport/cuda/cuda_memory_copier.h"
#if TANDEM_HAVE_NCCL
#include "common/transport/cuda/nccl_connect.h"
#include "common/transport/cuda/nccl_transport.h"
#endif
#endif

namespace tandem {

void AddNodeKvTransportFlags(FlagSet& flags, NodeKvTransportOptions* options) {
  flags.Section("KV transport");
  flags.String("kv-transport", &options->kind,
               {"KIND",
                "auto (default: ucx for --backend cpu and sim, cuda for --backend cuda), ucx, "
                "cuda (device pools: CUDA IPC on one host, staged through pinned memory between "
                "hosts) or nccl (needs two GPUs)"});
  flags.String("kv-advertise", &options->advertise,
               {"HOST:PORT",
                "--kv-transport nccl on a decode node: this node's gRPC address as prefill nodes "
                "reach it"});
  flags.String("kv-interface", &options->interface,
               {"NAME[,NAME]",
                "network interfaces UCX may use (UCX_NET_DEVICES); default: the one that owns "
                "--listen's address, or all for 0.0.0.0"});
  flags.Custom(
      "kv-port-range", {"LO-HI", "TCP ports UCX's tcp transport listens on (default: any)"},
      [options](std::string_view v) -> std::string {
        const size_t dash = v.find('-');
        int lo = 0;
        int hi = 0;
        if (dash == std::string_view::npos ||
            !absl::SimpleAtoi(absl::string_view(v.data(), dash), &lo) ||
            !absl::SimpleAtoi(absl::string_view(v.data() + dash + 1, v.size() - dash - 1), &hi) ||
            lo < 1 || hi > 65535 || lo > hi) {
          return "expects LO-HI, two TCP ports with 1 <= LO <= HI <= 65535";
        }
        options->port_range = std::string(v);
        return "";
      });
  flags.String("cluster-secret-file", &options->cluster_secret_file,
               {"PATH",
                "secret shared by every prefill and decode node (>= 32 bytes): KV handoffs and "
                "completions carry its HMAC, and a prefill node writes nothing for a handoff that "
                "does not verify (required on prefill nodes; a decode node without it refuses "
                "Reserve and serves colocated requests only)"});
  flags.Switch("insecure-no-handoff-auth", &options->insecure_no_handoff_auth,
               "run without the secret (anyone who reaches a node's gRPC port can then direct "
               "where KV is written); experiments only");
  flags.Section("TLS (this node's gRPC server)");
  AddTlsServerFlags(flags, &options->tls);
  if (!options->owner || options->writer) {
    flags.Section(options->owner ? "TLS towards other decode nodes (--serve-prefill: ConnectKv of "
                                   "--kv-transport nccl)"
                                 : "TLS towards decode nodes (ConnectKv of --kv-transport nccl)");
    AddTlsClientFlags(flags, &options->node_tls);
  }
}

absl::StatusOr<std::shared_ptr<const HandoffAuthenticator>> LoadHandoffAuth(
    const NodeKvTransportOptions& options, bool required) {
  if (options.insecure_no_handoff_auth) {
    if (!options.cluster_secret_file.empty()) {
      return absl::InvalidArgumentError(
          "give --cluster-secret-file or --insecure-no-handoff-auth, not both");
    }
    spdlog::warn(
        "--insecure-no-handoff-auth: KV handoffs are not authenticated; anyone who reaches a "
        "node's gRPC port can direct where a decode node's memory is written");
    return std::shared_ptr<const HandoffAuthenticator>();
  }
  if (options.cluster_secret_file.empty() && !required) {
    return std::shared_ptr<const HandoffAuthenticator>();
  }
  if (options.cluster_secret_file.empty()) {
    return absl::InvalidArgumentError(
        "--cluster-secret-file PATH is required: a file of at least 32 random bytes that every "
        "prefill and decode node of the cluster shares (e.g. `openssl rand -hex 32 > PATH`); it "
        "authenticates KV handoffs (--insecure-no-handoff-auth runs without)");
  }
  return HandoffAuthenticator::FromSecretFile(options.cluster_secret_file);
}

std::string InterfaceOfAddress(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  const bool is_v4 = inet_pton(AF_INET, host.c_str(), &v4) == 1;
  const bool is_v6 = !is_v4 && inet_pton(AF_INET6, host.c_str(), &v6) == 1;
  if (!is_v4 && !is_v6) return "";
  if (is_v4 && v4.s_addr == htonl(INADDR_ANY)) return "";
  if (is_v6 && IN6_IS_ADDR_UNSPECIFIED(&v6)) return "";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* a = list; a != nullptr && name.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    if (is_v4 && a->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr == v4.s_addr) {
      name = a->ifa_name;
    } else if (is_v6 && a->ifa_addr->sa_family == AF_INET6 &&
               std::memcmp(&reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, &v6,
                           sizeof(v6)) == 0) {
      name = a->ifa_name;
    }
  }
  freeifaddrs(list);
  return name;
}

namespace {

// UCX's interfaces: --kv-interface, else the one --listen names, else UCX's own choice; its tcp
// ports: --kv-port-range.
void RestrictUcxInterfaces(const NodeKvTransportOptions& options, UcxTransportOptions* ucx) {
  // A UCT (tcp transport) setting that ucp_config_modify does not take in UCX 1.13: set through
  // the environment before the transport starts.
  if (!options.port_range.empty()) ::setenv("UCX_TCP_PORT_RANGE", options.port_range.c_str(), 1);
  std::string devices = options.interface;
  if (devices.empty() && std::getenv("UCX_NET_DEVICES") == nullptr) {
    std::string host = options.listen.substr(0, options.listen.rfind(':'));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    devices = InterfaceOfAddress(host);
  }
  if (devices.empty()) return;
  ucx->config["NET_DEVICES"] = devices;
  spdlog::info("{}: UCX uses network interfaces {}", options.name, devices);
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvTransport>> CreateNodeKvTransport(
    const NodeEngineOptions& engine, const NodeKvTransportOptions& options) {
  const bool cuda = engine.backend == BackendKind::kCuda;
  std::string kind = options.kind;
  if (kind == "auto") kind = cuda ? "cuda" : "ucx";
  if (kind != "ucx" && kind != "cuda" && kind != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-transport must be auto, ucx, cuda or nccl, not '", kind, "'"));
  }
  if (cuda == (kind == "ucx")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv-transport ", kind, " does not fit --backend ",
        std::string(BackendKindName(engine.backend)),
        " (ucx moves host pools: the cpu and sim backends; cuda and nccl move device pools)"));
  }
  if (kind == "ucx") {
    UcxTransportOptions ucx_options;
    ucx_options.name = options.name;
    ucx_options.test_corrupt_writes = KvWriteCorruption::FromEnvironment();
    RestrictUcxInterfaces(options, &ucx_options);
    ASSIGN_OR_RETURN(std::unique_ptr<UcxTransport> ucx, UcxTransport::Create(ucx_options));
    return std::unique_ptr<KvTransport>(std::move(ucx));
  }
#if TANDEM_HAVE_CUDA
  if (kind == "cuda") {
    UcxTransportOptions ucx_options;
    ucx_options.name = options.name;
    RestrictUcxInterfaces(options, &ucx_options);
    ASSIGN_OR_RETURN(std::unique_ptr<UcxTransport> ucx, UcxTransport::Create(ucx_options));
    ASSIGN_OR_RETURN(std::unique_ptr<CudaMemoryCopier> copier,
                     CudaMemoryCopier::Create(engine.cuda.device));
    ASSIGN_OR_RETURN(std::unique_ptr<CudaKvTransport> transport,
                     CudaKvTransport::Create(std::move(ucx), std::move(copier), {}));
    return std::unique_ptr<KvTransport>(std::move(transport));
  }
#if TANDEM_HAVE_NCCL
  NcclKvTransportOptions nccl;
  nccl.cuda_device = engine.cuda.device;
  if (options.owner) {
    if (options.advertise.empty()) {
      return absl::InvalidArgumentError(
          "--kv-transport nccl on a decode node needs --kv-advertise HOST:PORT (this node's gRPC "
          "address as prefill nodes reach it)");
    }
    nccl.address = options.advertise;
  }
  // A writer dials the owners' ConnectKv; one transport can be both (NcclKvTransport keeps a
  // writer and an owner side), e.g. a decode node that prefills for others (--serve-prefill).
  if (!options.owner || options.writer) {
    grpc::ChannelArguments args;
    ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                     GrpcChannelCredentials(options.node_tls, &args));
    nccl.connect = GrpcNcclConnectHook(std::move(credentials), std::move(args));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<NcclKvTransport> transport, NcclKvTransport::Create(nccl));
  return std::unique_ptr<KvTransport>(std::move(transport));
#else
  return absl::UnimplementedError("--kv-transport nccl: this build found no NCCL in the toolkit");
#endif
#else
  return absl::UnimplementedError(
      "--backend cuda: this build has no CUDA (configure with TANDEM_CUDA=ON where nvcc is)");
#endif
}

std::function<absl::Status(std::string_view, uint64_t)> NcclAcceptor(KvTransport* transport) {
#if TANDEM_HAVE_CUDA && TANDEM_HAVE_NCCL
  if (auto* nccl = dynamic_cast<NcclKvTransport*>(transport); nccl != nullptr) {
    return [nccl](std::string_view id, uint64_t incarnation) {
      return nccl->AcceptConnection(id, incarnation);
    };
  }
#endif
  return nullptr;
}

KvPoolHooks TransportPoolHooks(KvTransport* transport) {
  KvPoolHooks hooks;
  hooks.allocate_host_pool = [transport](size_t bytes) { return transport->AllocatePool(bytes); };
  hooks.register_device_pool = [transport](void* base, size_t bytes, int device) {
    return transport->RegisterDevicePool(base, bytes, device);
  };
  return hooks;
}

}  // namespace tandem
