// CPU reference of kernels/rms_norm.h on host memory (bf16 as its bits).
#ifndef TANDEM_KERNELS_RMS_NORM_REFERENCE_H_
#define TANDEM_KERNELS_RMS_NORM_REFERENCE_H_

#include "kernels/bf16_reference.h"

namespace tandem::kernels {

struct RmsNormResidualReferenceArgs {
  float* residual = nullptr;
  const Bf16Bits* delta = nullptr;
  const Bf16Bits* delta_bias = nullptr;
  const Bf16Bits* weight = nullptr;
  int n = 0;
  int hidden = 0;
  float eps = 1e-5f;
  Bf16Bits* out = nullptr;
};

void RmsNormResidualReference(const RmsNormResidualReferenceArgs& args);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_RMS_NORM_REFERENCE_H_
