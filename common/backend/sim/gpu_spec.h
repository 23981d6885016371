// The named GPUs the sim backend models: datasheet peaks and the efficiency factors that turn them
// into what serving kernels reach. Constants and their sources are in README.md beside this file.
#ifndef TANDEM_COMMON_BACKEND_SIM_GPU_SPEC_H_
#define TANDEM_COMMON_BACKEND_SIM_GPU_SPEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tandem {

struct GpuSpec {
  std::string name;
  double peak_bf16_flops = 0;  // dense, per GPU
  double hbm_bytes_per_s = 0;  // per GPU
  int64_t memory_bytes = 0;    // per GPU, as the driver reports it
  // Fractions of the peaks that serving kernels reach.
  double gemm_efficiency = 0.7;        // linear layers (cuBLAS bf16 GEMMs)
  double attention_efficiency = 0.5;   // prefill attention FLOPs (flash attention)
  double bandwidth_efficiency = 0.85;  // weight and KV reads (decode GEMVs, paged attention)
  double step_overhead_s = 0.0005;     // per engine step: launches, sampling, host work
  // Tensor parallel all-reduce: ring bus bandwidth per GPU (NVLink) and per-call latency.
  double allreduce_bytes_per_s = 0;
  double allreduce_latency_s = 10e-6;
  // Bytes of each GPU's memory kept for activations, CUDA graphs and the CUDA context.
  int64_t reserved_bytes = int64_t{2} << 30;
};

// "h100" (alias "h100-sxm"), "h200", "a100" (alias "a100-80gb"). NotFound lists the names.
absl::StatusOr<GpuSpec> FindGpuSpec(std::string_view name);
std::vector<std::string> GpuSpecNames();

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_SIM_GPU_SPEC_H_
