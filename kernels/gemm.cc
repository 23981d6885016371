// GemmRunner (kernels/gemm.h). cuBLASLt is column-major, so the row-major product
// y[rows, n] = x[rows, k] · w[n, k]^T is computed as its transpose y^T = w · x^T: a row-major
// [n, k] w read column-major is w^T (k x n, ld k), taken with op T; a row-major [rows, k] x read
// column-major is x^T (k x rows, ld k), op N; y^T is n x rows column-major (ld n), i.e. y
// row-major.
#include "kernels/gemm.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/util/status_macros.h"
#include "kernels/cublaslt_api.h"
#include "kernels/cuda_status.h"

namespace tandem::kernels {
namespace {

// The loaded cuBLASLt; GemmRunner::Create loads it before anything here runs.
const CublasLtApi& Lt() { return **LoadCublasLt(); }

// Alignment cuBLASLt may assume for x, w and y (the heuristic is told so). cudaMalloc gives 256.
constexpr uintptr_t kRequiredAlignment = 16;

bool IsAligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kRequiredAlignment == 0; }

std::string ShapeName(int rows, int k, int n, GemmOutput output) {
  return absl::StrCat("rows=", rows, " k=", k, " n=", n,
                      output == GemmOutput::kBf16 ? " bf16 output" : " f32 output");
}

// Two CUDA events for Autotune's timing, destroyed with their owner.
struct CudaEventPair {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  absl::Status Create() {
    TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreate(&start), "cudaEventCreate");
    TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreate(&stop), "cudaEventCreate");
    return absl::OkStatus();
  }
  ~CudaEventPair() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
};

}  // namespace

struct GemmRunner::Plan {
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (matmul != nullptr) Lt().MatmulDescDestroy(matmul);
    if (w_layout != nullptr) Lt().MatrixLayoutDestroy(w_layout);
    if (x_layout != nullptr) Lt().MatrixLayoutDestroy(x_layout);
    if (y_layout != nullptr) Lt().MatrixLayoutDestroy(y_layout);
  }

  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t w_layout = nullptr;  // A: w^T column-major, k x n, ld k
  cublasLtMatrixLayout_t x_layout = nullptr;  // B: x^T column-major, k x rows, ld k
  cublasLtMatrixLayout_t y_layout = nullptr;  // C and D: y^T column-major, n x rows, ld n
  cublasLtMatmulAlgo_t algo = {};
};

absl::StatusOr<std::unique_ptr<GemmRunner>> GemmRunner::Create(size_t workspace_bytes) {
  RETURN_IF_ERROR(LoadCublasLt().status());
  std::unique_ptr<GemmRunner> runner(new GemmRunner());
  TANDEM_RETURN_IF_CUBLAS_ERROR(Lt().Create(&runner->handle_), "cublasLtCreate");
  ASSIGN_OR_RETURN(runner->workspace_, DeviceBuffer::Allocate(workspace_bytes));
  return runner;
}

GemmRunner::~GemmRunner() {
  plans_.clear();  // descriptors before the handle
  if (handle_ != nullptr) Lt().Destroy(handle_);
}

absl::StatusOr<std::unique_ptr<GemmRunner::Plan>> GemmRunner::NewPlan(
    int rows, int k, int n, GemmOutput output,
    std::vector<cublasLtMatmulHeuristicResult_t>* algorithms, int max_algorithms) {
  const std::string shape = ShapeName(rows, k, n, output);
  auto plan = std::make_unique<Plan>();
  TANDEM_RETURN_IF_CUBLAS_ERROR(
      Lt().MatmulDescCreate(&plan->matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F),
      "cublasLtMatmulDescCreate");
  const cublasOperation_t transpose = CUBLAS_OP_T;
  const cublasOperation_t no_transpose = CUBLAS_OP_N;
  TANDEM_RETURN_IF_CUBLAS_ERROR(
      Lt().MatmulDescSetAttribute(plan->matmul, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                  sizeof(transpose)),
      "cublasLtMatmulDescSetAttribute(TRANSA)");
  TANDEM_RETURN_IF_CUBLAS_ERROR(
      Lt().MatmulDescSetAttribute(plan->matmul, CUBLASLT_MATMUL_DESC_TRANSB, &no_transpose,
                                  sizeof(no_transpose)),
      "cublasLtMatmulDescSetAttribute(TRANSB)");
  const cudaDataType_t y_type = output == GemmOutput::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  TANDEM_RETURN_IF_CUBLAS_ERROR(Lt().MatrixLayoutCreate(&plan->w_layout, CUDA_R_16BF, k, n, k),
                                "cublasLtMatrixLayoutCreate(w)");
  TANDEM_RETURN_IF_CUBLAS_ERROR(Lt().MatrixLayoutCreate(&plan->x_layout, CUDA_R_16BF, k, rows, k),
                                "cublasLtMatrixLayoutCreate(x)");
  TANDEM_RETURN_IF_CUBLAS_ERROR(Lt().MatrixLayoutCreate(&plan->y_layout, y_type, n, rows, n),
                                "cublasLtMatrixLayoutCreate(y)");

  cublasLtMatmulPreference_t preference = nullptr;
  TANDEM_RETURN_IF_CUBLAS_ERROR(Lt().MatmulPreferenceCreate(&preference),
                                "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace_bytes = workspace_.bytes();
  const uint32_t alignment = kRequiredAlignment;
  // Split-K partial sums are reduced in f32 (in the workspace) or not split at all: the in-place
  // and output-type schemes add the partials up in the output type, which for bf16 output loses
  // ~10x a bf16 rounding at k = 4100 (seen on the first GPU run: 1.156 for 1.076).
  const uint32_t reduction_schemes =
      CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  cublasStatus_t status =
      Lt().MatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                        &workspace_bytes, sizeof(workspace_bytes));
  if (status == CUBLAS_STATUS_SUCCESS) {
    status =
        Lt().MatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                          &reduction_schemes, sizeof(reduction_schemes));
  }
  for (const cublasLtMatmulPreferenceAttributes_t attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (status == CUBLAS_STATUS_SUCCESS) {
      status =
          Lt().MatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof(alignment));
    }
  }
  algorithms->assign(static_cast<size_t>(max_algorithms), cublasLtMatmulHeuristicResult_t{});
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status = Lt().MatmulAlgoGetHeuristic(handle_, plan->matmul, plan->w_layout, plan->x_layout,
                                         plan->y_layout, plan->y_layout, preference, max_algorithms,
                                         algorithms->data(), &found);
  }
  Lt().MatmulPreferenceDestroy(preference);
  TANDEM_RETURN_IF_CUBLAS_ERROR(status, absl::StrCat("cuBLASLt heuristic for ", shape));
  algorithms->resize(static_cast<size_t>(std::max(found, 0)));
  std::erase_if(*algorithms, [](const cublasLtMatmulHeuristicResult_t& r) {
    return r.state != CUBLAS_STATUS_SUCCESS;
  });
  if (algorithms->empty()) {
    return absl::UnimplementedError(absl::StrCat("cuBLASLt has no algorithm for ", shape, " with ",
                                                 workspace_bytes, " bytes of workspace"));
  }
  plan->algo = algorithms->front().algo;
  return plan;
}

absl::StatusOr<const GemmRunner::Plan*> GemmRunner::PlanFor(int rows, int k, int n,
                                                            GemmOutput output) {
  const auto key = std::make_tuple(rows, k, n, static_cast<int>(output));
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  std::vector<cublasLtMatmulHeuristicResult_t> algorithms;
  ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, NewPlan(rows, k, n, output, &algorithms, 1));
  const Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

absl::Status GemmRunner::CheckArgs(const LinearArgs& args) {
  if (args.rows < 0) return absl::InvalidArgumentError(absl::StrCat("Linear: rows ", args.rows));
  if (args.k <= 0) return absl::InvalidArgumentError(absl::StrCat("Linear: k ", args.k));
  if (args.n <= 0) return absl::InvalidArgumentError(absl::StrCat("Linear: n ", args.n));
  if (args.output != GemmOutput::kBf16 && args.output != GemmOutput::kF32) {
    return absl::InvalidArgumentError("Linear: unknown output type");
  }
  if (args.rows == 0) return absl::OkStatus();
  if (args.x == nullptr) return absl::InvalidArgumentError("Linear: x is null");
  if (args.w == nullptr) return absl::InvalidArgumentError("Linear: w is null");
  if (args.y == nullptr) return absl::InvalidArgumentError("Linear: y is null");
  if (!IsAligned(args.x) || !IsAligned(args.w) || !IsAligned(args.y)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Linear: x, w and y must be ", kRequiredAlignment, "-byte aligned"));
  }
  return absl::OkStatus();
}

absl::Status GemmRunner::Run(const Plan& plan, const cublasLtMatmulAlgo_t& algo,
                             const LinearArgs& args, cudaStream_t stream) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  TANDEM_RETURN_IF_CUBLAS_ERROR(
      Lt().Matmul(handle_, plan.matmul, &alpha, args.w, plan.w_layout, args.x, plan.x_layout, &beta,
                  args.y, plan.y_layout, args.y, plan.y_layout, &algo, workspace_.data(),
                  workspace_.bytes(), stream),
      absl::StrCat("cublasLtMatmul rows=", args.rows, " k=", args.k, " n=", args.n));
  return absl::OkStatus();
}

absl::Status GemmRunner::Linear(const LinearArgs& args, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckArgs(args));
  if (args.rows == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Plan* plan, PlanFor(args.rows, args.k, args.n, args.output));
  return Run(*plan, plan->algo, args, stream);
}

absl::StatusOr<GemmTuning> GemmRunner::Autotune(const LinearArgs& args, cudaStream_t stream,
                                                int max_candidates, int iterations,
                                                std::span<const __nv_bfloat16* const> weights) {
  RETURN_IF_ERROR(CheckArgs(args));
  if (args.rows == 0) return absl::InvalidArgumentError("Autotune: rows 0");
  if (max_candidates < 1 || iterations < 1) {
    return absl::InvalidArgumentError("Autotune: max_candidates and iterations must be >= 1");
  }
  for (const __nv_bfloat16* w : weights) {
    if (w == nullptr || !IsAligned(w)) {
      return absl::InvalidArgumentError("Autotune: a weight to cycle over is null or unaligned");
    }
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone) {
    return absl::FailedPreconditionError("Autotune: the stream is being captured");
  }
  std::vector<cublasLtMatmulHeuristicResult_t> algorithms;
  ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan,
                   NewPlan(args.rows, args.k, args.n, args.output, &algorithms, max_candidates));
  CudaEventPair events;
  RETURN_IF_ERROR(events.Create());
  GemmTuning tuning;
  tuning.candidates = static_cast<int>(algorithms.size());
  double best = 0;
  for (size_t i = 0; i < algorithms.size(); ++i) {
    // An algorithm the heuristic offered may still refuse this problem: skip it, unless it is the
    // heuristic's own first choice (Linear would fail the same way).
    const absl::Status warmup = Run(*plan, algorithms[i].algo, args, stream);
    if (!warmup.ok()) {
      if (i == 0) return warmup;
      continue;
    }
    TANDEM_RETURN_IF_CUDA_ERROR(cudaEventRecord(events.start, stream), "cudaEventRecord");
    for (int r = 0; r < iterations; ++r) {
      LinearArgs call = args;
      if (!weights.empty()) call.w = weights[static_cast<size_t>(r) % weights.size()];
      RETURN_IF_ERROR(Run(*plan, algorithms[i].algo, call, stream));
    }
    TANDEM_RETURN_IF_CUDA_ERROR(cudaEventRecord(events.stop, stream), "cudaEventRecord");
    TANDEM_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(events.stop), "cudaEventSynchronize");
    float ms = 0;
    TANDEM_RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&ms, events.start, events.stop),
                                "cudaEventElapsedTime");
    const double seconds = ms * 1e-3 / iterations;
    if (i == 0) tuning.heuristic_seconds = seconds;
    if (i == 0 || seconds < best) {
      best = seconds;
      tuning.chosen = static_cast<int>(i);
    }
  }
  tuning.best_seconds = best;
  plan->algo = algorithms[static_cast<size_t>(tuning.chosen)].algo;
  plans_[std::make_tuple(args.rows, args.k, args.n, static_cast<int>(args.output))] =
      std::move(plan);
  return tuning;
}

}  // namespace tandem::kernels
