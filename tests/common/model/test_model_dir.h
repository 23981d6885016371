// Helpers for tests that need model directories on disk: a self-deleting temporary directory,
// raw safetensors bytes, and small Hugging Face model directories built from a ModelConfig.
#ifndef TANDEM_TESTS_COMMON_MODEL_TEST_MODEL_DIR_H_
#define TANDEM_TESTS_COMMON_MODEL_TEST_MODEL_DIR_H_

#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "common/model/model_weights.h"
#include "common/model/safetensors_writer.h"
#include "gtest/gtest.h"

namespace tandem::testing {

// A fresh directory under the test temp dir, removed with everything in it on destruction.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string tmpl = ::testing::TempDir() + "tandem_model_test_XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  ASSERT_TRUE(out.good()) << path;
}

// A safetensors file from a literal header and data section (for malformed files).
inline void WriteRawSafetensors(const std::string& path, const std::string& header,
                                const std::string& data) {
  std::string bytes(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(n >> (8 * i));
  WriteFile(path, bytes + header + data);
}

// A small config of the given architecture with its family's features switched on.
inline ModelConfig SmallConfig(Architecture arch) {
  ModelConfig c;
  c.architecture = arch;
  c.vocab_size = 96;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  c.attention_bias = arch == Architecture::kQwen2;
  c.qk_norm = arch == Architecture::kQwen3;
  return c;
}

// Named f32 tensors, owned, for writing.
struct OwnedTensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kF32;
  std::vector<uint8_t> bytes;
};

// The tensors `config` calls for, with distinct deterministic values.
inline std::vector<OwnedTensor> MakeTensors(const ModelConfig& config, DType dtype = DType::kF32) {
  std::vector<OwnedTensor> out;
  int k = 0;
  for (const TensorSpec& spec : ExpectedTensors(config)) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>((i * 7 + k * 13) % 97 - 48);
    out.push_back({spec.name, spec.shape, dtype, EncodeF32(dtype, v)});
    ++k;
  }
  return out;
}

inline std::vector<TensorToWrite> Views(const std::vector<OwnedTensor>& tensors) {
  std::vector<TensorToWrite> out;
  for (const OwnedTensor& t : tensors) out.push_back({t.name, t.dtype, t.shape, t.bytes});
  return out;
}

// Writes DIR/config.json and DIR/model.safetensors (or `shards` shards + index).
inline void WriteModelDir(const std::string& dir, const ModelConfig& config,
                          const std::vector<OwnedTensor>& tensors, int shards = 1) {
  WriteFile(dir + "/config.json", ModelConfigToJson(config));
  std::vector<TensorToWrite> views = Views(tensors);
  if (shards == 1) {
    ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", views).ok());
  } else {
    auto groups = ShardIntoCount(views, shards);
    ASSERT_TRUE(groups.ok()) << groups.status();
    ASSERT_TRUE(WriteSafetensorsShards(dir, *groups).ok());
  }
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_MODEL_TEST_MODEL_DIR_H_
