#include "tools/generate/generate_backend.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/backend/cpu_backend.h"
#include "common/util/status_macros.h"
#if TANDEM_HAVE_CUDA
#include "common/backend/cuda/cuda_backend.h"
#include "kernels/cuda_status.h"
#endif

namespace tandem {

bool GenerateHasCuda() { return TANDEM_HAVE_CUDA != 0; }

absl::Status CheckGenerateBackend(const GenerateOptions& options) {
  if (options.backend == BackendKind::kCpu) return absl::OkStatus();
  if (!CudaStoresKvDType(options.kv_cache_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv-cache-dtype ", KvDTypeName(*options.kv_cache_dtype.dtype), kCudaKvDTypeRefusal));
  }
  if (options.backend != BackendKind::kCuda) {
    return absl::InvalidArgumentError(absl::StrCat("--backend must be cpu or cuda, not '",
                                                   std::string(BackendKindName(options.backend)),
                                                   "'"));
  }
#if TANDEM_HAVE_CUDA
  if (absl::Status gpu = kernels::CudaDeviceAvailable(); !gpu.ok()) {
    return absl::Status(gpu.code(), absl::StrCat("--backend cuda: no usable GPU (", gpu.message(),
                                                 "); use --backend cpu"));
  }
  return absl::OkStatus();
#else
  return absl::UnimplementedError(
      "--backend cuda: this build has no CUDA (configure with TANDEM_CUDA=ON where nvcc is)");
#endif
}

absl::StatusOr<std::unique_ptr<Backend>> CreateGenerateBackend(const GenerateOptions& options,
                                                               const ModelWeights& weights) {
  RETURN_IF_ERROR(CheckGenerateBackend(options));
  const size_t kv_cache_bytes = size_t{static_cast<size_t>(options.kv_cache_mib)} << 20;
  if (options.backend == BackendKind::kCuda) {
#if TANDEM_HAVE_CUDA
    CudaBackendOptions o;
    o.device = options.cuda_device;
    o.block_size = options.block_size;
    o.num_kv_blocks = options.num_kv_blocks;
    o.kv_cache_bytes = kv_cache_bytes;
    o.max_batch_tokens = options.max_num_batched_tokens;
    o.max_num_seqs = options.max_num_seqs;
    o.max_context = options.max_model_len;
    o.kv_cache_dtype = options.kv_cache_dtype.Or(DType::kBF16);
    o.cuda_graphs = options.cuda_graphs;
    ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend, CudaBackend::Create(weights, o));
    return std::unique_ptr<Backend>(std::move(backend));
#endif
  }
  CpuBackendOptions o;
  o.num_threads = options.num_threads;
  o.block_size = options.block_size;
  o.num_kv_blocks = options.num_kv_blocks;
  o.kv_cache_bytes = kv_cache_bytes;
  o.max_batch_tokens = options.max_num_batched_tokens;
  o.kv_dtype = options.kv_cache_dtype.Or(DType::kF32);
  ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend, CpuBackend::Create(weights, o));
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace tandem
