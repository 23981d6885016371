// GemmRunner (kernels/gemm.h). cuBLASLt is column-major, so the row-major product
// y[rows, n] = x[rows, k] · w[n, k]^T is computed as its transpose y^T = w · x^T: a row-major
// [n, k] w read column-major is w^T (k x n, ld k), taken with op T; a row-major [rows, k] x read
// column-major is x^T (k x rows, ld k), op N; y^T is n x rows column-major (ld n), i.e. y
// row-major.
#include "kernels/gemm.h"

#include <cstdint>
#include <utility>

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

absl::StatusOr<const GemmRunner::Plan*> GemmRunner::PlanFor(int rows, int k, int n,
                                                            GemmOutput output) {
  const auto key = std::make_tuple(rows, k, n, static_cast<int>(output));
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();

  const std::string shape =
      absl::StrCat("rows=", rows, " k=", k, " n=", n,
                   output == GemmOutput::kBf16 ? " bf16 output" : " f32 output");
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
  cublasStatus_t status =
      Lt().MatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                        &workspace_bytes, sizeof(workspace_bytes));
  for (const cublasLtMatmulPreferenceAttributes_t attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (status == CUBLAS_STATUS_SUCCESS) {
      status =
          Lt().MatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof(alignment));
    }
  }
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  if (status == CUBLAS_STATUS_SUCCESS) {
    status =
        Lt().MatmulAlgoGetHeuristic(handle_, plan->matmul, plan->w_layout, plan->x_layout,
                                    plan->y_layout, plan->y_layout, preference, 1, &result, &found);
  }
  Lt().MatmulPreferenceDestroy(preference);
  TANDEM_RETURN_IF_CUBLAS_ERROR(status, absl::StrCat("cuBLASLt heuristic for ", shape));
  if (found == 0) {
    return absl::UnimplementedError(absl::StrCat("cuBLASLt has no algorithm for ", shape, " with ",
                                                 workspace_bytes, " bytes of workspace"));
  }
  plan->algo = result.algo;
  const Plan* raw = plan.get();
  plans_.emplace(key, std::move(plan));
  return raw;
}

absl::Status GemmRunner::Linear(const LinearArgs& args, cudaStream_t stream) {
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
  ASSIGN_OR_RETURN(const Plan* plan, PlanFor(args.rows, args.k, args.n, args.output));
  const float alpha = 1.0f;
  const float beta = 0.0f;
  TANDEM_RETURN_IF_CUBLAS_ERROR(
      Lt().Matmul(handle_, plan->matmul, &alpha, args.w, plan->w_layout, args.x, plan->x_layout,
                  &beta, args.y, plan->y_layout, args.y, plan->y_layout, &plan->algo,
                  workspace_.data(), workspace_.bytes(), stream),
      absl::StrCat("cublasLtMatmul rows=", args.rows, " k=", args.k, " n=", args.n));
  return absl::OkStatus();
}

}  // namespace tandem::kernels
