// Section "prefill_attention": kernels::PrefillAttention alone, one prompt of T tokens from
// position 0 with Llama-3-8B's heads (one layer per call), as causal FLOP/s against the GEMM
// peak: the share of a prefill that is attention, measured apart from the linear layers.
#ifndef TANDEM_BENCH_GPU_PREFILL_ATTENTION_BENCH_H_
#define TANDEM_BENCH_GPU_PREFILL_ATTENTION_BENCH_H_

#include <vector>

#include "bench/gpu/bench_report.h"
#include "bench/gpu/device_roofline.h"
#include "common/model/model_config.h"

namespace tandem::bench {

inline constexpr char kPrefillAttentionSection[] = "prefill_attention";

struct PrefillAttentionBenchOptions {
  std::vector<int> tokens = {1024, 4096, 16384};
  int layers = 2;  // calls alternate over this many layers' K/V
  int warmup = 2;
  int iterations = 5;
  int repeats = 3;
};

void RunPrefillAttentionBench(const ModelConfig& config, const PrefillAttentionBenchOptions& o,
                              const DeviceRoofline& roofline, BenchReport* report);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_PREFILL_ATTENTION_BENCH_H_
