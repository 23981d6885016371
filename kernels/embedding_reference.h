// CPU references of kernels/embedding.h, same arguments on host memory (bf16 as its bits).
#ifndef TANDEM_KERNELS_EMBEDDING_REFERENCE_H_
#define TANDEM_KERNELS_EMBEDDING_REFERENCE_H_

#include <cstdint>

#include "kernels/bf16_reference.h"

namespace tandem::kernels {

void EmbeddingGatherReference(const Bf16Bits* table, int vocab, int hidden, const int32_t* ids,
                              int n, float* x);
void GatherRowsReference(const Bf16Bits* src, int width, const int32_t* rows, int n, Bf16Bits* dst);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_EMBEDDING_REFERENCE_H_
