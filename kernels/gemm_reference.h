// CPU reference of kernels/gemm.h: y[r, j] = sum_i f32(x[r, i]) * f32(w[j, i]), f32 output.
#ifndef TANDEM_KERNELS_GEMM_REFERENCE_H_
#define TANDEM_KERNELS_GEMM_REFERENCE_H_

#include "kernels/bf16_reference.h"

namespace tandem::kernels {

void LinearReference(const Bf16Bits* x, int rows, int k, const Bf16Bits* w, int n, float* y);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_GEMM_REFERENCE_H_
