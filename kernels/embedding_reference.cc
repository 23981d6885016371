#include "kernels/embedding_reference.h"

#include <cstring>

namespace tandem::kernels {

void EmbeddingGatherReference(const Bf16Bits* table, int vocab, int hidden, const int32_t* ids,
                              int n, float* x) {
  for (int i = 0; i < n; ++i) {
    float* row = x + int64_t{i} * hidden;
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab) {
      for (int j = 0; j < hidden; ++j) row[j] = 0.0f;
      continue;
    }
    const Bf16Bits* src = table + int64_t{id} * hidden;
    for (int j = 0; j < hidden; ++j) row[j] = Bf16ToFloat(src[j]);
  }
}

void GatherRowsReference(const Bf16Bits* src, int width, const int32_t* rows, int n,
                         Bf16Bits* dst) {
  for (int i = 0; i < n; ++i) {
    std::memcpy(dst + int64_t{i} * width, src + int64_t{rows[i]} * width,
                sizeof(Bf16Bits) * static_cast<size_t>(width));
  }
}

}  // namespace tandem::kernels
