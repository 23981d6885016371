// CPU reference of kernels/swiglu.h.
#ifndef TANDEM_KERNELS_SWIGLU_REFERENCE_H_
#define TANDEM_KERNELS_SWIGLU_REFERENCE_H_

#include "kernels/bf16_reference.h"

namespace tandem::kernels {

void SwiGluReference(const Bf16Bits* gate_up, int n, int inter, Bf16Bits* out);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_SWIGLU_REFERENCE_H_
