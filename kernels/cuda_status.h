// CUDA, cuBLAS and NCCL error codes as absl::Status, for launchers and the cuda backend: every CUDA
// error becomes a Status at the boundary (ARCHITECTURE.md, Conventions).
#ifndef TANDEM_KERNELS_CUDA_STATUS_H_
#define TANDEM_KERNELS_CUDA_STATUS_H_

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string_view>

#include "absl/status/status.h"

namespace tandem::kernels {

// OK for cudaSuccess; otherwise Internal (Unavailable for "no device"/"insufficient driver"),
// with `what`, the error's name and its description.
absl::Status CudaStatus(cudaError_t error, std::string_view what);
absl::Status CublasStatus(cublasStatus_t status, std::string_view what);

// Whether a CUDA device can be used, and if not, why (no driver, no device, ...).
absl::Status CudaDeviceAvailable();

}  // namespace tandem::kernels

// Evaluates a cudaError_t expression; returns a Status from the enclosing function on error.
// The runtime also records the error as the thread's last error, which a later kernel launch's
// check would report as its own: it is taken off here (a sticky error stays, as it should).
#define TANDEM_RETURN_IF_CUDA_ERROR(expr, what)                         \
  do {                                                                  \
    const cudaError_t tandem_cuda_error_ = (expr);                      \
    if (tandem_cuda_error_ != cudaSuccess) {                            \
      cudaGetLastError();                                               \
      return ::tandem::kernels::CudaStatus(tandem_cuda_error_, (what)); \
    }                                                                   \
  } while (false)

#define TANDEM_RETURN_IF_CUBLAS_ERROR(expr, what)                            \
  do {                                                                       \
    const cublasStatus_t tandem_cublas_status_ = (expr);                     \
    if (tandem_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                    \
      return ::tandem::kernels::CublasStatus(tandem_cublas_status_, (what)); \
    }                                                                        \
  } while (false)

#endif  // TANDEM_KERNELS_CUDA_STATUS_H_
