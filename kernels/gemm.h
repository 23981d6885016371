// The linear layers' GEMMs on cuBLASLt: y[rows, n] = x[rows, k] · w[n, k]^T with bf16 inputs in
// PyTorch's row-major [out, in] weight layout, f32 accumulation, bf16 or f32 output. The best
// algorithm per shape is asked of cuBLASLt's heuristic once and cached (or measured among its
// candidates by Autotune); the workspace is owned
// here, so calls are legal inside CUDA graph capture.
#ifndef TANDEM_KERNELS_GEMM_H_
#define TANDEM_KERNELS_GEMM_H_

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <vector>

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

// What GemmRunner::Autotune measured for one shape.
struct GemmTuning {
  int candidates = 0;            // algorithms the heuristic offered (at most max_candidates)
  int chosen = 0;                // the fastest's index among them (0: the heuristic's own choice)
  double heuristic_seconds = 0;  // per call, the heuristic's first choice
  double best_seconds = 0;       // per call, the chosen one
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

  // Times up to `max_candidates` of the heuristic's algorithms for args' shape on args' own
  // buffers (y is overwritten), `iterations` calls each after one warm-up call, and keeps the
  // fastest for every later Linear of that shape. The timed calls cycle over `weights` (same
  // shape as args.w; empty: args.w alone), so a weight that fits in L2 is timed as a model's
  // layers see it, cold. Synchronizes `stream`; FailedPrecondition while it is being captured.
  absl::StatusOr<GemmTuning> Autotune(const LinearArgs& args, cudaStream_t stream,
                                      int max_candidates = 8, int iterations = 10,
                                      std::span<const __nv_bfloat16* const> weights = {});

 private:
  struct Plan;
  GemmRunner() = default;
  static absl::Status CheckArgs(const LinearArgs& args);
  // A plan with the heuristic's first algorithm; `algorithms` gets up to max_algorithms of them.
  absl::StatusOr<std::unique_ptr<Plan>> NewPlan(
      int rows, int k, int n, GemmOutput output,
      std::vector<cublasLtMatmulHeuristicResult_t>* algorithms, int max_algorithms);
  absl::StatusOr<const Plan*> PlanFor(int rows, int k, int n, GemmOutput output);
  absl::Status Run(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const LinearArgs& args,
                   cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<int, int, int, int>, std::unique_ptr<Plan>> plans_;
};

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_GEMM_H_
