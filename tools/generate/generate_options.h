// What tandem-generate is asked to do; filled from flags in main.cc.
#ifndef TANDEM_TOOLS_GENERATE_GENERATE_OPTIONS_H_
#define TANDEM_TOOLS_GENERATE_GENERATE_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/backend/backend_kind.h"
#include "common/engine/speculative.h"
#include "common/kv/kv_dtype.h"
#include "common/sampling/sampling_params.h"

namespace tandem {

struct GenerateOptions {
  std::string model_dir;
  // Exactly one of prompt / prompts_file.
  std::optional<std::string> prompt;
  std::optional<std::string> prompts_file;  // one JSON value per line (see RunGenerate)
  bool chat = false;                        // apply the model's chat template
  bool add_special_tokens = true;           // the tokenizer's post-processor (BOS) for text
  SamplingParams sampling;
  bool include_logprobs = false;  // print per-token logprobs (sampling.logprobs >= 0)
  // kCpu (f32 compute on the host) or kCuda (bf16 on a GPU; builds with CUDA only); not kSim.
  BackendKind backend = BackendKind::kCpu;
  int cuda_device = 0;      // cuda: which GPU
  bool cuda_graphs = true;  // cuda: replay decode steps as CUDA graphs
  int max_model_len = 0;    // cuda: longest context to size buffers for; 0: the model's maximum
  // Engine.
  int num_threads = 0;  // 0: all cores (cpu backend)
  int block_size = 16;
  int num_kv_blocks = 0;  // 0: from kv_cache_mib
  int kv_cache_mib = 256;
  // auto: f32 on cpu, bf16 on cuda; cpu also stores bf16 and fp8_e4m3 (common/kv/kv_dtype.h).
  KvCacheDType kv_cache_dtype;
  int max_num_batched_tokens = 512;
  int max_num_seqs = 64;
  bool enable_prefix_caching = true;
  // --speculative ngram, --num-speculative-tokens K (common/engine/speculative.h).
  SpeculativeOptions speculative;
};

}  // namespace tandem

#endif  // TANDEM_TOOLS_GENERATE_GENERATE_OPTIONS_H_
