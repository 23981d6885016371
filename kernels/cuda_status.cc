#include "kernels/cuda_status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cublaslt_api.h"

namespace tandem::kernels {

absl::Status CudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": CUDA error ", cudaGetErrorName(error),
                                     " (", cudaGetErrorString(error), ")");
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    return absl::UnavailableError(message);
  }
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status CublasStatus(cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusOr<const CublasLtApi*> lt = LoadCublasLt();
  std::string message = absl::StrCat(std::string(what), ": cuBLAS error ", static_cast<int>(status),
                                     " (", lt.ok() ? (*lt)->GetStatusString(status) : "?", ")");
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return absl::UnimplementedError(message);
  if (status == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status CudaDeviceAvailable() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return CudaStatus(error, "cudaGetDeviceCount");
  if (count == 0) return absl::UnavailableError("cudaGetDeviceCount: no CUDA device");
  return absl::OkStatus();
}

}  // namespace tandem::kernels
