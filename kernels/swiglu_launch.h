// Internal to kernels/: the CUDA launch behind kernels/swiglu.h, defined in swiglu.cu and called by
// swiglu.cc once the arguments are checked. Plain C++ and CUDA runtime only.
#ifndef TANDEM_KERNELS_SWIGLU_LAUNCH_H_
#define TANDEM_KERNELS_SWIGLU_LAUNCH_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace tandem::kernels::internal {

// Preconditions (checked by the caller): n > 0, inter > 0, non-null pointers.
cudaError_t LaunchSwiGlu(const __nv_bfloat16* gate_up, int n, int inter, __nv_bfloat16* out,
                         cudaStream_t stream);

}  // namespace tandem::kernels::internal

#endif  // TANDEM_KERNELS_SWIGLU_LAUNCH_H_
