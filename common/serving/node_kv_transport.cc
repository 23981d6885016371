#include "common/serving/node_kv_transport.h"

#include <utility>

#include "common/transport/ucx_transport.h"
#include "common/util/status_macros.h"
#if TANDEM_HAVE_CUDA
#include "common/transport/cuda/cuda_kv_transport.h"
#include "common/transport/cuda/cuda_memory_copier.h"
#endif

namespace tandem {

absl::StatusOr<std::unique_ptr<KvTransport>> CreateNodeKvTransport(const NodeEngineOptions& options,
                                                                   const std::string& name) {
  UcxTransportOptions ucx_options;
  ucx_options.name = name;
  ASSIGN_OR_RETURN(std::unique_ptr<UcxTransport> ucx, UcxTransport::Create(ucx_options));
  if (options.backend != "cuda") return std::unique_ptr<KvTransport>(std::move(ucx));
#if TANDEM_HAVE_CUDA
  ASSIGN_OR_RETURN(std::unique_ptr<CudaMemoryCopier> copier,
                   CudaMemoryCopier::Create(options.cuda_device));
  ASSIGN_OR_RETURN(std::unique_ptr<CudaKvTransport> cuda,
                   CudaKvTransport::Create(std::move(ucx), std::move(copier), {}));
  return std::unique_ptr<KvTransport>(std::move(cuda));
#else
  return absl::UnimplementedError(
      "--backend cuda: this build has no CUDA (configure with TANDEM_CUDA=ON where nvcc is)");
#endif
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
