// The cuda backend the decode and prefill sections drive: Llama-3-8B's shapes with random weights
// made on the device, and a KV pool as large as the cases want or as the GPU's free memory allows
// (whichever is smaller), so the cases that do not fit are skipped with the numbers that say why.
#ifndef TANDEM_BENCH_GPU_BENCH_BACKEND_H_
#define TANDEM_BENCH_GPU_BENCH_BACKEND_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/backend/cuda/cuda_backend.h"
#include "common/model/model_config.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {

struct BenchBackendOptions {
  int device = 0;
  int block_size = 16;
  int max_num_seqs = 128;
  int max_context = 8192;
  int max_batch_tokens = 4096;
  // The most KV tokens any case wants at once (the pool is not made larger).
  size_t wanted_kv_tokens = 0;
  // Left free beyond weights and pool: scratch for max_batch_tokens, logits, cuBLAS workspace,
  // decode workspace, CUDA graphs.
  size_t headroom_bytes = size_t{4} << 30;
  uint64_t seed = 1;
  DType kv_dtype = DType::kBF16;  // or kFP8E4M3 (scales calibrated at creation)
};

struct BenchBackend {
  std::unique_ptr<CudaBackend> backend;
  std::string sizing_note;  // how the pool was sized, for the table
  nlohmann::json details;   // the same as numbers, for the JSON
};

// Creates the backend on options.device. ResourceExhausted (with the sizes) when even the weights
// and the headroom do not fit; a pool that fails to allocate is retried smaller a few times.
absl::StatusOr<BenchBackend> CreateBenchBackend(const ModelConfig& config,
                                                const BenchBackendOptions& options);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_BENCH_BACKEND_H_
