#include "kernels/swiglu_reference.h"

#include <cmath>
#include <cstdint>

namespace tandem::kernels {

void SwiGluReference(const Bf16Bits* gate_up, int n, int inter, Bf16Bits* out) {
  for (int r = 0; r < n; ++r) {
    const Bf16Bits* gate = gate_up + int64_t{r} * 2 * inter;
    const Bf16Bits* up = gate + inter;
    Bf16Bits* row = out + int64_t{r} * inter;
    for (int i = 0; i < inter; ++i) {
      const float g = Bf16ToFloat(gate[i]);
      const float u = Bf16ToFloat(up[i]);
      row[i] = FloatToBf16(g / (1.0f + std::exp(-g)) * u);
    }
  }
}

}  // namespace tandem::kernels
