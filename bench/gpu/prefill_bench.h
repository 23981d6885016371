// Section 3: the cuda backend's prefill of one long prompt (Llama-3-8B shapes, random weights)
// against the device's measured bf16 GEMM peak.
#ifndef TANDEM_BENCH_GPU_PREFILL_BENCH_H_
#define TANDEM_BENCH_GPU_PREFILL_BENCH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "bench/gpu/bench_report.h"
#include "bench/gpu/device_roofline.h"
#include "common/backend/cuda/cuda_backend.h"

namespace tandem::bench {

inline constexpr char kPrefillSection[] = "prefill";

struct PrefillBenchOptions {
  int tokens = 4096;  // one sequence, positions [0, tokens); needs max_batch_tokens >= tokens
  int warmup = 1;
  int repeats = 5;
  uint64_t seed = 9;
};

// Adds one row (achieved FLOP/s vs the GEMM peak; goal >= 0.70), or a failed row.
void RunPrefillBench(CudaBackend& backend, const PrefillBenchOptions& options,
                     const DeviceRoofline& roofline, BenchReport* report);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_PREFILL_BENCH_H_
