// A deliberately plain forward pass for checking the CPU backend: one sequence from position 0,
// dense K/V, no batching, no paging, double precision throughout, written from the Hugging Face
// modeling code (Llama / Mistral / Qwen2 / Qwen3) rather than from the backend.
#ifndef TANDEM_TESTS_COMMON_BACKEND_REFERENCE_FORWARD_H_
#define TANDEM_TESTS_COMMON_BACKEND_REFERENCE_FORWARD_H_

#include <span>
#include <vector>

#include "common/model/model_weights.h"

namespace tandem::testing {

// logits[p][v] for every position p of `tokens`.
std::vector<std::vector<double>> ReferenceLogits(const ModelWeights& weights,
                                                 std::span<const TokenId> tokens);

// HF's inv_freq (with rope_scaling), in double.
std::vector<double> ReferenceInvFreq(const ModelConfig& config);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_BACKEND_REFERENCE_FORWARD_H_
