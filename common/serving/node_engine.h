// A node's model, CPU backend and running engine, built from the flags every node shares.
#ifndef TANDEM_COMMON_SERVING_NODE_ENGINE_H_
#define TANDEM_COMMON_SERVING_NODE_ENGINE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/backend/cpu_backend.h"
#include "common/engine/engine.h"
#include "common/util/cli_flags.h"

namespace tandem {

struct NodeEngineOptions {
  std::string model_dir;
  std::string served_model_name;  // "": the model directory's base name
  std::string node_id;            // shown in every log line; "": none
  int num_threads = 0;            // 0: all cores
  int block_size = 16;
  int kv_cache_mib = 256;
  int max_num_batched_tokens = 512;
  int max_num_seqs = 64;
  bool enable_prefix_caching = true;
  // The engine's step observer (EngineOptions::on_step), e.g. NodeEngineMetrics; not a flag.
  std::function<void(const EngineStepStats&)> on_step;
};

// Registers --model, --served-model-name, --node-id, --threads, --block-size, --kv-cache-mb,
// --max-num-batched-tokens, --max-num-seqs, --no-prefix-caching.
void AddNodeEngineFlags(FlagSet& flags, NodeEngineOptions* options);

class NodeEngine {
 public:
  // Loads the model, builds the backend (its KV pool from `kv_pool_allocator` when set) and
  // starts the engine thread.
  static absl::StatusOr<std::unique_ptr<NodeEngine>> Create(
      const NodeEngineOptions& options,
      std::function<absl::StatusOr<void*>(size_t)> kv_pool_allocator = nullptr);
  ~NodeEngine();

  Engine* engine() const { return engine_.get(); }
  CpuBackend* backend() const { return backend_.get(); }
  const std::string& model_name() const { return model_name_; }

 private:
  NodeEngine() = default;
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<Engine> engine_;
  std::string model_name_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_NODE_ENGINE_H_
