#include "bench/gpu/gpu_info.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cublaslt_api.h"
#include "kernels/cuda_status.h"

namespace tandem::bench {

std::string CudaVersionString(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

absl::StatusOr<GpuInfo> QueryGpuInfo(int device) {
  GpuInfo info;
  info.device = device;
  cudaDeviceProp prop{};
  TANDEM_RETURN_IF_CUDA_ERROR(cudaGetDeviceProperties(&prop, device),
                              absl::StrCat("cudaGetDeviceProperties(", device, ")"));
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.total_memory_bytes = prop.totalGlobalMem;
  info.memory_bus_width_bits = prop.memoryBusWidth;
  info.l2_cache_bytes = static_cast<size_t>(prop.l2CacheSize);
  char bus_id[64] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device) == cudaSuccess) {
    info.pci_bus_id = bus_id;
  }
  TANDEM_RETURN_IF_CUDA_ERROR(cudaDriverGetVersion(&info.driver_version), "cudaDriverGetVersion");
  TANDEM_RETURN_IF_CUDA_ERROR(cudaRuntimeGetVersion(&info.runtime_version),
                              "cudaRuntimeGetVersion");
  if (auto lt = kernels::LoadCublasLt(); lt.ok()) info.cublaslt_version = (*lt)->GetVersion();
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) info.host = host;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[32] = {};
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
  info.date_utc = date;
  return info;
}

nlohmann::json GpuInfo::ToJson() const {
  return {{"device", device},
          {"name", name},
          {"pci_bus_id", pci_bus_id},
          {"compute_capability", absl::StrCat(compute_major, ".", compute_minor)},
          {"multiprocessors", multiprocessors},
          {"total_memory_bytes", total_memory_bytes},
          {"memory_bus_width_bits", memory_bus_width_bits},
          {"l2_cache_bytes", l2_cache_bytes},
          {"driver_version", CudaVersionString(driver_version)},
          {"runtime_version", CudaVersionString(runtime_version)},
          {"cublaslt_version", cublaslt_version},
          {"host", host},
          {"date_utc", date_utc}};
}

std::string GpuInfo::Summary() const {
  return absl::StrFormat("%s (sm_%d%d, %d SMs, %.1f GiB), driver %s, runtime %s, cuBLASLt %d", name,
                         compute_major, compute_minor, multiprocessors,
                         total_memory_bytes / double(1 << 30), CudaVersionString(driver_version),
                         CudaVersionString(runtime_version), static_cast<int>(cublaslt_version));
}

}  // namespace tandem::bench
