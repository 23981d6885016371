// Token sampling on the GPU from f32 logits rows: greedy (argmax) and temperature + top-k + top-p.
// One thread block per row; no sort of the vocabulary and no host round trip.
#ifndef TANDEM_KERNELS_SAMPLING_H_
#define TANDEM_KERNELS_SAMPLING_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/sampling_params.h"  // SamplingRowParams

namespace tandem::kernels {

// tokens[r] = the lowest index j with the largest logits[r, j].
absl::Status GreedySample(const float* logits, int rows, int vocab, int32_t* tokens,
                          cudaStream_t stream);

// tokens[r] for each row with temperature > 0, exactly as the reference defines it (the arithmetic
// both use is in kernels/sampling_math.h):
//   p = softmax(logits[r] / temperature), as f32 weights exp((logit - max) / temperature) (one exp
//   shared by host and device) summed in 64-bit fixed point, so every mass is exact;
//   rank tokens by logit descending (the order of p; ties: lower index first); K = the top_k best
//   (all when top_k <= 0); keep the shortest prefix of that ranking whose mass >= top_p * mass(K)
//   (at least one token); walk the kept tokens in increasing index order and return the first
//   whose running mass exceeds u * mass(kept), u = SamplingUniform(seed, counter) (the last kept
//   token if none does).
// Rows with temperature <= 0 are greedy. Checks pointers, rows >= 0, vocab > 0. The GPU picks the
// reference's token on every input, ties included. A -inf logit masks its token; NaN logits are
// not supported.
absl::Status TopKTopPSample(const float* logits, int rows, int vocab,
                            const SamplingRowParams* params, int32_t* tokens, cudaStream_t stream);

}  // namespace tandem::kernels

#endif  // TANDEM_KERNELS_SAMPLING_H_
