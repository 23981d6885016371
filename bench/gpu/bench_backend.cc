#include "bench/gpu/bench_backend.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/gpu/model_costs.h"
#include "bench/gpu/timing.h"
#include "kernels/cuda_status.h"

namespace tandem::bench {
namespace {

double GiB(double bytes) { return bytes / double(size_t{1} << 30); }

}  // namespace

absl::StatusOr<BenchBackend> CreateBenchBackend(const ModelConfig& config,
                                                const BenchBackendOptions& o) {
  TANDEM_RETURN_IF_CUDA_ERROR(cudaSetDevice(o.device),
                              absl::StrCat("cudaSetDevice(", o.device, ")"));
  size_t free_bytes = 0, total_bytes = 0;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const size_t weight_estimate = static_cast<size_t>(config.NumParameters()) * 2;
  const size_t block_bytes = KvBytesPerToken(config) / 2 * DTypeSize(o.kv_dtype) * o.block_size;
  if (free_bytes < weight_estimate + o.headroom_bytes + block_bytes) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the GPU has %.1f GiB free; the bf16 weights need %.1f GiB plus %.1f GiB of scratch "
        "headroom and a KV pool",
        GiB(free_bytes), GiB(weight_estimate), GiB(o.headroom_bytes)));
  }
  const size_t available_blocks = (free_bytes - weight_estimate - o.headroom_bytes) / block_bytes;
  const size_t wanted_blocks = (o.wanted_kv_tokens + o.block_size - 1) / o.block_size;
  size_t blocks = std::min(available_blocks, std::max<size_t>(wanted_blocks, 1));
  blocks = std::min<size_t>(blocks, size_t{1} << 30);  // num_blocks is an int

  CudaBackendOptions options;
  options.device = o.device;
  options.block_size = o.block_size;
  options.max_batch_tokens = o.max_batch_tokens;
  options.max_num_seqs = o.max_num_seqs;
  options.max_context = o.max_context;
  options.cuda_graphs = true;
  options.kv_cache_dtype = o.kv_dtype;

  absl::Status last_error;
  for (int attempt = 0; attempt < 4 && blocks > 0; ++attempt) {
    options.num_kv_blocks = static_cast<int>(blocks);
    const double start = WallSeconds();
    absl::StatusOr<std::unique_ptr<CudaBackend>> backend =
        CudaBackend::CreateWithRandomWeights(config, o.seed, options);
    if (backend.ok()) {
      BenchBackend result;
      result.backend = std::move(*backend);
      const double pool_bytes = double(blocks) * block_bytes;
      result.sizing_note = absl::StrFormat(
          "KV pool %d blocks of %d tokens = %.1f GiB (%.1f GiB wanted, %.1f GiB free before the "
          "%.1f GiB of weights, %.1f GiB left as headroom)",
          static_cast<int>(blocks), o.block_size, GiB(pool_bytes),
          GiB(double(wanted_blocks) * block_bytes), GiB(free_bytes),
          GiB(result.backend->weight_bytes()), GiB(o.headroom_bytes));
      result.details = {{"num_kv_blocks", blocks},
                        {"block_size", o.block_size},
                        {"kv_pool_bytes", result.backend->kv_pool_bytes()},
                        {"kv_bytes_per_token", result.backend->kv_layout().bytes_per_token()},
                        {"kv_dtype", DTypeName(o.kv_dtype)},
                        {"wanted_kv_tokens", o.wanted_kv_tokens},
                        {"free_bytes_before", free_bytes},
                        {"total_bytes", total_bytes},
                        {"weight_bytes", result.backend->weight_bytes()},
                        {"parameters", config.NumParameters()},
                        {"max_num_seqs", o.max_num_seqs},
                        {"max_context", o.max_context},
                        {"max_batch_tokens", o.max_batch_tokens},
                        {"create_seconds", WallSeconds() - start},
                        {"create_attempts", attempt + 1}};
      return result;
    }
    last_error = backend.status();
    if (!absl::IsResourceExhausted(last_error)) return last_error;
    blocks = blocks * 3 / 4;  // the headroom guess was short: try a smaller pool
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "could not fit the backend with a smaller KV pool either: ", last_error.ToString()));
}

}  // namespace tandem::bench
