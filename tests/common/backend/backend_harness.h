// Helpers shared by the CPU backend tests: the model cases, backend creation, one Forward call
// returning its logits, and per-sequence KV bookkeeping.
#ifndef TANDEM_TESTS_COMMON_BACKEND_BACKEND_HARNESS_H_
#define TANDEM_TESTS_COMMON_BACKEND_BACKEND_HARNESS_H_

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend/cpu_backend.h"

namespace tandem::testing {

// One architecture/dtype combination to run every correctness test against.
struct ModelCase {
  std::string name;
  ModelConfig config;
  DType dtype;
};
// Llama (MHA), Llama 3.1 rope scaling + tied + bf16 + GQA 2, Qwen2 bias + f16 + GQA 4 + linear
// scaling, Qwen3 qk-norm + bf16 + GQA 4 + head_dim 64, Mistral sliding window, odd sizes with
// Llama's attention_bias (o_proj bias too).
std::vector<ModelCase> AllModelCases();
inline void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

std::unique_ptr<CpuBackend> MakeBackend(const ModelWeights& weights, int num_blocks,
                                        int block_size = 4, int threads = 2);

// Runs `items` and returns their logits rows, [rows * vocab].
absl::StatusOr<std::vector<float>> RunForward(CpuBackend& backend,
                                              const std::vector<ForwardItem>& items);

std::vector<TokenId> RandomTokens(int n, int vocab, uint64_t seed);

// A sequence being fed to a backend: its tokens, its blocks, and how many positions are cached.
struct Sequence {
  std::vector<TokenId> tokens;
  std::vector<int32_t> blocks;
  int cached = 0;

  // The item feeding the next `count` tokens (they become cached).
  ForwardItem Next(int count, bool want_logits);
};

// Max |a - b| over a row, relative to max(1, max |ref|).
double RelativeError(const float* got, const std::vector<double>& ref);

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_BACKEND_BACKEND_HARNESS_H_
