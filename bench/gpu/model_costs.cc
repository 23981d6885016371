#include "bench/gpu/model_costs.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tandem::bench {

ModelConfig Llama3_8BConfig() {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 8192;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.tie_word_embeddings = false;
  c.dtype = DType::kBF16;
  c.bos_token_id = 128000;
  c.eos_token_ids = {128001};
  return c;
}

size_t KvBytesPerToken(const ModelConfig& config) {
  return size_t{2} * config.num_layers * config.num_kv_heads * config.head_dim * 2;
}

int64_t LinearWeightElements(const ModelConfig& config) {
  const int64_t h = config.hidden_size, q = config.q_size(), kv = config.kv_size();
  const int64_t inter = config.intermediate_size;
  const int64_t per_layer = h * (q + 2 * kv)  // fused q/k/v
                            + q * h           // o
                            + 3 * h * inter;  // fused gate/up, down
  return per_layer * config.num_layers;
}

DecodeTraffic DecodeStepTraffic(const ModelConfig& config, int batch, int context) {
  const size_t h = config.hidden_size;
  const size_t vocab = config.vocab_size;
  const size_t norms = h * (2 * size_t(config.num_layers) + 1);
  DecodeTraffic t;
  t.weight_bytes = 2 * (size_t(LinearWeightElements(config)) + norms + vocab * h);
  t.embedding_bytes = 2 * size_t(batch) * h;
  t.kv_read_bytes = size_t(batch) * size_t(context) * KvBytesPerToken(config);
  t.kv_write_bytes = size_t(batch) * KvBytesPerToken(config);
  t.logits_bytes = size_t(batch) * vocab * sizeof(float);
  return t;
}

PrefillFlops PrefillFlopCount(const ModelConfig& config, int tokens) {
  const double t = tokens;
  PrefillFlops f;
  f.linear = 2.0 * static_cast<double>(LinearWeightElements(config)) * t;
  // Causal attention: each of t queries sees on average ~t/2 keys; QK^T and PV are 2 FLOPs per
  // multiply-add each.
  f.attention = 4.0 * config.num_layers * config.num_heads * config.head_dim * t * t / 2.0;
  f.lm_head = 2.0 * config.hidden_size * static_cast<double>(config.vocab_size);
  f.two_params_tokens_convention =
      2.0 * static_cast<double>(config.NumParameters()) * t + f.attention;
  return f;
}

absl::StatusOr<std::vector<std::vector<int32_t>>> DistinctBlockTables(int num_seqs,
                                                                      int blocks_per_seq,
                                                                      int pool_blocks,
                                                                      uint64_t seed) {
  if (num_seqs < 0 || blocks_per_seq < 0) {
    return absl::InvalidArgumentError("DistinctBlockTables: negative size");
  }
  const int64_t needed = int64_t{num_seqs} * blocks_per_seq;
  if (needed > pool_blocks) {
    return absl::FailedPreconditionError(absl::StrCat(num_seqs, " sequences x ", blocks_per_seq,
                                                      " blocks need ", needed,
                                                      " blocks; the pool has ", pool_blocks));
  }
  std::vector<int32_t> ids(pool_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<std::vector<int32_t>> tables(num_seqs);
  for (int s = 0; s < num_seqs; ++s) {
    auto first = ids.begin() + int64_t{s} * blocks_per_seq;
    tables[s].assign(first, first + blocks_per_seq);
  }
  return tables;
}

std::vector<int32_t> RandomTokenIds(int n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
  std::vector<int32_t> out(n);
  for (int32_t& t : out) t = dist(rng);
  return out;
}

}  // namespace tandem::bench
