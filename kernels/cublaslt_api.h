// cuBLASLt, loaded on first use with dlopen instead of linked. libcublasLt carries ~94 KB of static
// TLS: linked into a binary, it raises every thread's minimum stack above what some libraries'
// threads get (civetweb, under the metrics endpoint, starts its threads with 100 KB stacks and
// fails), and it would make every CUDA build of the nodes need CUDA's libraries even on the cpu
// backend. Loaded with dlopen, its TLS is allocated per thread on demand, and only a process that
// runs GEMMs on a GPU needs the library.
#ifndef TANDEM_KERNELS_CUBLASLT_API_H_
#define TANDEM_KERNELS_CUBLASLT_API_H_

#include <cublasLt.h>

#include "absl/status/statusor.h"

namespace tandem::kernels {

struct CublasLtApi {
  decltype(&cublasLtCreate) Create;
  decltype(&cublasLtDestroy) Destroy;
  decltype(&cublasLtGetVersion) GetVersion;
  decltype(&cublasLtGetStatusString) GetStatusString;
  decltype(&cublasLtMatmul) Matmul;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
};

// Loads libcublasLt.so.13 once (the loader's search path, then $CUDA_HOME/lib64,
// /usr/local/cuda/lib64 and /usr/local/cuda/lib) and resolves every function above. Unavailable,
// naming what was tried, when it cannot. Thread-safe; the library stays loaded.
absl::StatusOr<const CublasLtApi*> LoadCublasLt();

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_CUBLASLT_API_H_
