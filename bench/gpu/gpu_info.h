// What machine a GPU benchmark ran on: the device's name and memory, the CUDA driver, runtime and
// cuBLASLt versions, the host and the date, for the JSON header.
#ifndef TANDEM_BENCH_GPU_GPU_INFO_H_
#define TANDEM_BENCH_GPU_GPU_INFO_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {

struct GpuInfo {
  int device = 0;
  std::string name;
  std::string pci_bus_id;
  int compute_major = 0;
  int compute_minor = 0;
  int multiprocessors = 0;
  size_t total_memory_bytes = 0;
  int memory_bus_width_bits = 0;
  size_t l2_cache_bytes = 0;
  int driver_version = 0;   // cudaDriverGetVersion: 1000 * major + 10 * minor
  int runtime_version = 0;  // cudaRuntimeGetVersion
  size_t cublaslt_version = 0;
  std::string host;
  std::string date_utc;  // ISO 8601

  nlohmann::json ToJson() const;
  // "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.6 GiB), driver 13.0, runtime 13.0"
  std::string Summary() const;
};

// Queries `device` (the caller has checked that a device is usable).
absl::StatusOr<GpuInfo> QueryGpuInfo(int device);

// "13.0" from 13000.
std::string CudaVersionString(int version);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_GPU_INFO_H_
