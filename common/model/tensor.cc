#include "common/model/tensor.h"

#include <cstring>

#include "common/util/fp8.h"
#include "common/util/half.h"

namespace tandem {

void ConvertToF32(const TensorView& t, float* dst) {
  const size_t n = static_cast<size_t>(t.numel());
  // Tensors in a safetensors file need not be aligned for their element type: copy bytes.
  switch (t.dtype) {
    case DType::kF32:
      std::memcpy(dst, t.data, n * sizeof(float));
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, t.data + 2 * i, sizeof(v));
        dst[i] = Bf16ToF32(v);
      }
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, t.data + 2 * i, sizeof(v));
        dst[i] = F16ToF32(v);
      }
      return;
    case DType::kFP8E4M3:
      for (size_t i = 0; i < n; ++i) dst[i] = Fp8E4M3ToF32(t.data[i]);
      return;
  }
}

}  // namespace tandem
