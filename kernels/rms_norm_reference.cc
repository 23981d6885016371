#include "kernels/rms_norm_reference.h"

#include <cmath>
#include <cstdint>

namespace tandem::kernels {

void RmsNormResidualReference(const RmsNormResidualReferenceArgs& args) {
  const int hidden = args.hidden;
  for (int r = 0; r < args.n; ++r) {
    float* x = args.residual + int64_t{r} * hidden;
    if (args.delta != nullptr) {
      const Bf16Bits* d = args.delta + int64_t{r} * hidden;
      for (int i = 0; i < hidden; ++i) {
        float add = Bf16ToFloat(d[i]);
        if (args.delta_bias != nullptr) add += Bf16ToFloat(args.delta_bias[i]);
        x[i] += add;
      }
    }
    float sum_squares = 0.0f;
    for (int i = 0; i < hidden; ++i) sum_squares += x[i] * x[i];
    const float inv_rms = 1.0f / std::sqrt(sum_squares / static_cast<float>(hidden) + args.eps);
    Bf16Bits* out = args.out + int64_t{r} * hidden;
    for (int i = 0; i < hidden; ++i) {
      out[i] = FloatToBf16(Bf16ToFloat(args.weight[i]) * (x[i] * inv_rms));
    }
  }
}

}  // namespace tandem::kernels
