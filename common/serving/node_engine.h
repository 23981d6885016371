// A node's model, backend (cpu, or cuda when built with CUDA) and running engine, built from the
// flags every node shares.
#ifndef TANDEM_COMMON_SERVING_NODE_ENGINE_H_
#define TANDEM_COMMON_SERVING_NODE_ENGINE_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/backend/backend.h"
#include "common/engine/engine.h"
#include "common/util/cli_flags.h"

namespace tandem {

struct NodeEngineOptions {
  std::string model_dir;
  std::string served_model_name;  // "": the model directory's base name
  std::string node_id;            // shown in every log line; "": none
  std::string backend = "cpu";    // "cpu" or "cuda"
  int cuda_device = 0;            // --backend cuda: which GPU
  int max_model_len = 0;          // --backend cuda: longest context to size for; 0: the model's
  bool cuda_graphs = true;        // --backend cuda: replay decode steps as CUDA graphs
  int num_threads = 0;            // 0: all cores
  int block_size = 16;
  int kv_cache_mib = 256;
  int max_num_batched_tokens = 512;
  int max_num_seqs = 64;
  bool enable_prefix_caching = true;
  // The engine's step observer (EngineOptions::on_step), e.g. NodeEngineMetrics; not a flag.
  std::function<void(const EngineStepStats&)> on_step;
};

// Registers --model, --served-model-name, --node-id, --backend, --cuda-device, --max-model-len,
// --no-cuda-graphs, --threads, --block-size, --kv-cache-mb, --max-num-batched-tokens,
// --max-num-seqs, --no-prefix-caching.
void AddNodeEngineFlags(FlagSet& flags, NodeEngineOptions* options);

// How the node's KV transport gets at the pool the backend computes in.
struct KvPoolHooks {
  // cpu backend: allocates the (host) pool, registered with the transport. Unset: the backend's.
  std::function<absl::StatusOr<void*>(size_t bytes)> allocate_host_pool;
  // cuda backend: registers the device pool the backend allocated
  // (KvTransport::RegisterDevicePool).
  std::function<absl::Status(void* base, size_t bytes, int cuda_device)> register_device_pool;
};

class NodeEngine {
 public:
  // Loads the model, builds the backend (its KV pool through `pool_hooks`) and starts the engine
  // thread.
  static absl::StatusOr<std::unique_ptr<NodeEngine>> Create(const NodeEngineOptions& options,
                                                            KvPoolHooks pool_hooks = {});
  ~NodeEngine();

  Engine* engine() const { return engine_.get(); }
  Backend* backend() const { return backend_.get(); }
  const std::string& model_name() const { return model_name_; }

 private:
  NodeEngine() = default;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Engine> engine_;
  std::string model_name_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_NODE_ENGINE_H_
