#include "common/serving/node_kv_transport.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/transport/ucx_transport.h"
#include "common/util/status_macros.h"
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
  flags.String("kv-transport", &options->kind);
  flags.String("kv-advertise", &options->advertise);
}

absl::StatusOr<std::unique_ptr<KvTransport>> CreateNodeKvTransport(
    const NodeEngineOptions& engine, const NodeKvTransportOptions& options) {
  const bool cuda = engine.backend == "cuda";
  std::string kind = options.kind;
  if (kind == "auto") kind = cuda ? "cuda" : "ucx";
  if (kind != "ucx" && kind != "cuda" && kind != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-transport must be auto, ucx, cuda or nccl, not '", kind, "'"));
  }
  if (cuda == (kind == "ucx")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-transport ", kind, " does not fit --backend ", engine.backend,
                     " (ucx moves host pools: the cpu and sim backends; cuda and nccl move device pools)"));
  }
  if (kind == "ucx") {
    UcxTransportOptions ucx_options;
    ucx_options.name = options.name;
    ASSIGN_OR_RETURN(std::unique_ptr<UcxTransport> ucx, UcxTransport::Create(ucx_options));
    return std::unique_ptr<KvTransport>(std::move(ucx));
  }
#if TANDEM_HAVE_CUDA
  if (kind == "cuda") {
    UcxTransportOptions ucx_options;
    ucx_options.name = options.name;
    ASSIGN_OR_RETURN(std::unique_ptr<UcxTransport> ucx, UcxTransport::Create(ucx_options));
    ASSIGN_OR_RETURN(std::unique_ptr<CudaMemoryCopier> copier,
                     CudaMemoryCopier::Create(engine.cuda_device));
    ASSIGN_OR_RETURN(std::unique_ptr<CudaKvTransport> transport,
                     CudaKvTransport::Create(std::move(ucx), std::move(copier), {}));
    return std::unique_ptr<KvTransport>(std::move(transport));
  }
#if TANDEM_HAVE_NCCL
  NcclKvTransportOptions nccl;
  nccl.cuda_device = engine.cuda_device;
  if (options.owner) {
    if (options.advertise.empty()) {
      return absl::InvalidArgumentError(
          "--kv-transport nccl on a decode node needs --kv-advertise HOST:PORT (this node's gRPC "
          "address as prefill nodes reach it)");
    }
    nccl.address = options.advertise;
  } else {
    nccl.connect = GrpcNcclConnectHook();
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
