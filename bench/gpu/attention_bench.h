// Section 4: paged decode attention alone (kernels/decode_attention.h) at short to long contexts
// with Llama-3-8B's head shapes, as achieved K/V read bandwidth against the device's measured copy
// rate.
#ifndef TANDEM_BENCH_GPU_ATTENTION_BENCH_H_
#define TANDEM_BENCH_GPU_ATTENTION_BENCH_H_

#include <cstdint>
#include <vector>

#include "bench/gpu/bench_report.h"
#include "bench/gpu/device_roofline.h"
#include "common/model/model_config.h"
#include "common/types/dtype.h"

namespace tandem::bench {

inline constexpr char kAttentionSection[] = "attention";

struct AttentionBenchOptions {
  std::vector<int> contexts = {1024, 8192, 32768};
  std::vector<int> batches = {1, 8, 32};
  // Each case with the tensor-core partition kernel (the default) and the CUDA-core one.
  std::vector<bool> tensor_cores = {true, false};
  // Each case with a bf16 pool and an fp8 one (half the bytes; the goal is the same rate).
  std::vector<DType> kv_dtypes = {DType::kBF16, DType::kFP8E4M3};
  // Each call reads one layer; the calls cycle over this many layers so the previous call's K/V
  // is not still in L2.
  int layers = 4;
  int warmup = 3;
  int iterations = 20;  // calls per timed repeat
  int repeats = 5;      // the fastest repeat counts
  uint64_t seed = 5;
};

// One row per (batch size, context) (goal: >= 0.85 of the copy rate), or a failed/skipped row.
void RunAttentionBench(const ModelConfig& config, const AttentionBenchOptions& options,
                       const DeviceRoofline& roofline, BenchReport* report);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_ATTENTION_BENCH_H_
