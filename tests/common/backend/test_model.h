// Random-weight models of the supported architectures, built in memory for backend tests: the
// ModelWeights' TensorViews point into byte buffers the TestModel owns, in the dtype asked for.
#ifndef TANDEM_TESTS_COMMON_BACKEND_TEST_MODEL_H_
#define TANDEM_TESTS_COMMON_BACKEND_TEST_MODEL_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "common/model/model_weights.h"

namespace tandem::testing {

class TestModel {
 public:
  // Weights are uniform random with scales that keep activations O(1); `seed` picks them.
  TestModel(const ModelConfig& config, DType dtype, uint64_t seed);
  TestModel(const TestModel&) = delete;
  TestModel& operator=(const TestModel&) = delete;

  const ModelWeights& weights() const { return weights_; }
  ModelWeights& mutable_weights() { return weights_; }
  const ModelConfig& config() const { return weights_.config; }

 private:
  // A tensor of `shape` with values offset + uniform(-scale, scale), stored in `dtype_`.
  TensorView Make(const std::string& name, std::vector<int64_t> shape, float scale,
                  float offset = 0.0f);

  DType dtype_;
  uint64_t state_;
  std::deque<std::vector<uint8_t>> storage_;  // deque: stable addresses
  ModelWeights weights_;
};

// Small configs (2 layers, vocab 97, max_position_embeddings 256) of each architecture feature.
ModelConfig TinyLlamaConfig();  // 4 heads, 4 KV heads, head_dim 16, hidden 64

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_BACKEND_TEST_MODEL_H_
