// The MLP's activation: SiLU of the gate half times the up half of the fused gate/up GEMM output.
#ifndef TANDEM_KERNELS_SWIGLU_H_
#define TANDEM_KERNELS_SWIGLU_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace tandem::kernels {

// out[r, i] = bf16(silu(g) * u), g = f32(gate_up[r, i]), u = f32(gate_up[r, inter + i]),
// silu(g) = g / (1 + exp(-g)); gate_up is [n, 2 * inter], out is [n, inter].
absl::Status SwiGlu(const __nv_bfloat16* gate_up, int n, int inter, __nv_bfloat16* out,
                    cudaStream_t stream);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_SWIGLU_H_
