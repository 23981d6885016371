// Internal to kernels/: the CUDA launch behind kernels/rms_norm.h, defined in rms_norm.cu and
// called by rms_norm.cc once the arguments are checked. Plain C++ and CUDA runtime only.
#ifndef TANDEM_KERNELS_RMS_NORM_LAUNCH_H_
#define TANDEM_KERNELS_RMS_NORM_LAUNCH_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace tandem::kernels::internal {

// Preconditions (checked by the caller): residual, weight and out non-null; delta_bias only with
// delta; n > 0, hidden > 0, eps > 0.
cudaError_t LaunchRmsNormResidual(float* residual, const __nv_bfloat16* delta,
                                  const __nv_bfloat16* delta_bias, const __nv_bfloat16* weight,
                                  int n, int hidden, float eps, __nv_bfloat16* out,
                                  cudaStream_t stream);

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_RMS_NORM_LAUNCH_H_
