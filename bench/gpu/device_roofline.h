// The machine's own roofline, measured in the same run as everything it is compared with: the
// device-to-device copy rate (cudaMemcpyAsync) and the best cuBLASLt bf16 GEMM rate over a few
// large shapes (kernels/gemm.h, the GEMMs the cuda backend runs).
#ifndef TANDEM_BENCH_GPU_DEVICE_ROOFLINE_H_
#define TANDEM_BENCH_GPU_DEVICE_ROOFLINE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/gpu/bench_report.h"

namespace tandem::bench {

inline constexpr char kRooflineSection[] = "roofline";

struct GemmShape {
  int rows = 0;  // M: tokens
  int k = 0;     // in features
  int n = 0;     // out features
  std::string label;
};

// 8192^3, 16384x8192x8192, and Llama-3-8B's gate/up and down projections over 4096 tokens.
std::vector<GemmShape> DefaultGemmShapes();

struct RooflineOptions {
  size_t copy_bytes = size_t{1} << 30;
  int copy_warmup = 3;
  int copy_repeats = 20;  // the fastest copy counts
  std::vector<GemmShape> gemm_shapes = DefaultGemmShapes();
  int gemm_warmup = 3;
  int gemm_iterations = 10;  // back-to-back GEMMs per timed repeat
  int gemm_repeats = 5;      // the fastest repeat counts
};

struct DeviceRoofline {
  // (bytes read + bytes written) per second of the fastest copy: 2 * copy_bytes / time.
  double copy_rw_bytes_per_s = 0;
  // Bytes copied per second (the read-only convention): copy_bytes / time = copy_rw / 2.
  double copy_read_bytes_per_s = 0;
  double gemm_peak_flops_per_s = 0;  // the best shape's rate
  std::string gemm_peak_shape;
};

// Measures on the current device and adds rows to `report`'s roofline section. Fails when the
// copy or every GEMM shape failed (the floors of the other sections would be missing).
absl::StatusOr<DeviceRoofline> MeasureDeviceRoofline(const RooflineOptions& options,
                                                     BenchReport* report);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_DEVICE_ROOFLINE_H_
