// The linear layers' GEMMs on cuBLASLt: y[rows, n] = x[rows, k] · w[n, k]^T with bf16 inputs in
// PyTorch's row-major [out, in] weight layout, f32 accumulation, bf16 or f32 output. The best
// algorithm per shape is asked of cuBLASLt's heuristic once and cached; the workspace is owned
// here, so calls are legal inside CUDA graph capture.
#ifndef TANDEM_KERNELS_GEMM_H_
#define TANDEM_KERNELS_GEMM_H_

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/device_buffer.h"

namespace tandem::kernels {

enum class GemmOutput { kBf16, kF32 };

struct LinearArgs {
  const __nv_bfloat16* x = nullptr;  // [rows, k] row-major
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major
  void* y = nullptr;                 // [rows, n] row-major, bf16 or f32
  int rows = 0;
  int k = 0;
  int n = 0;
  GemmOutput output = GemmOutput::kBf16;
};

class GemmRunner {
 public:
  // A cuBLASLt handle and `workspace_bytes` of device workspace on the current device.
  static absl::StatusOr<std::unique_ptr<GemmRunner>> Create(size_t workspace_bytes = 32 << 20);
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // Checks pointers and sizes (rows == 0 is a no-op), then runs on `stream`.
  absl::Status Linear(const LinearArgs& args, cudaStream_t stream);

 private:
  struct Plan;
  GemmRunner() = default;
  absl::StatusOr<const Plan*> PlanFor(int rows, int k, int n, GemmOutput output);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<int, int, int, int>, std::unique_ptr<Plan>> plans_;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_GEMM_H_
