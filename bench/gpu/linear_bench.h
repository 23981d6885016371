// Section "linear": each linear layer of Llama-3-8B alone (kernels::GemmRunner on cuBLASLt), at
// decode batch sizes against its byte floor and at a prefill's row count against the GEMM peak,
// with the heuristic's algorithm and with the one GemmRunner::Autotune measures fastest. Where a
// decode step or a prefill loses time to its floor, these rows say which layer and whether
// choosing among cuBLASLt's own algorithms is enough.
#ifndef TANDEM_BENCH_GPU_LINEAR_BENCH_H_
#define TANDEM_BENCH_GPU_LINEAR_BENCH_H_

#include <vector>

#include "bench/gpu/bench_report.h"
#include "bench/gpu/device_roofline.h"
#include "common/model/model_config.h"

namespace tandem::bench {

inline constexpr char kLinearSection[] = "linear";

struct LinearBenchOptions {
  std::vector<int> rows = {1, 8, 32, 128, 4096};
  // Weight copies are cycled so the timed calls read at least this many bytes between two uses
  // of one copy: a 32 MiB weight would otherwise sit in the 50 MiB L2.
  double cycle_bytes = 256.0 * (1 << 20);
  int warmup = 3;
  int iterations = 20;  // calls per timed repeat
  int repeats = 3;      // the fastest repeat counts
  int autotune_candidates = 8;
};

// One row per (layer, rows): time (decode rows) or TFLOP/s (prefill rows) with the heuristic's
// algorithm, the autotuned one in the note and the JSON.
void RunLinearBench(const ModelConfig& config, const LinearBenchOptions& options,
                    const DeviceRoofline& roofline, BenchReport* report);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_LINEAR_BENCH_H_
