// A node's model, backend (cpu; cuda when built with CUDA; sim) and running engine, built from
// the flags every node shares.
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
  std::string backend = "cpu";    // "cpu", "cuda" or "sim"
  int cuda_device = 0;            // --backend cuda: which GPU
  int max_model_len = 0;          // --backend cuda: longest context to size for; 0: the model's
  bool cuda_graphs = true;        // --backend cuda: replay decode steps as CUDA graphs
  // --backend sim (common/backend/sim): the GPU and model shape it stands for.
  std::string sim_gpu = "h100";
  std::string sim_model;  // a preset (e.g. llama-3.1-8b); "": DIR/config.json's shape
  int sim_tensor_parallel = 1;
  int sim_kv_scale = 1;  // the pool keeps 1/N of each token's real KV bytes
  double sim_memory_utilization = 0.9;
  double sim_time_scale = 1.0;
  int sim_kv_blocks = 0;  // > 0: this many KV blocks instead of what the GPU's memory holds
  int num_threads = 0;    // 0: all cores
  int block_size = 16;
  int kv_cache_mib = 256;
  int max_num_batched_tokens = 512;
  int max_num_seqs = 64;
  bool enable_prefix_caching = true;
  // The engine's step observer (EngineOptions::on_step), e.g. NodeEngineMetrics; not a flag.
  std::function<void(const EngineStepStats&)> on_step;
};

// Registers --model, --served-model-name, --node-id, --backend, --cuda-device, --max-model-len,
// --no-cuda-graphs, --sim-gpu, --sim-model, --sim-tp, --sim-kv-scale, --sim-memory-utilization,
// --sim-time-scale, --sim-kv-blocks, --threads, --block-size, --kv-cache-mb,
// --max-num-batched-tokens,
// --max-num-seqs, --no-prefix-caching.
void AddNodeEngineFlags(FlagSet& flags, NodeEngineOptions* options);
// The --help lines of the backend and KV transport flags (AddNodeEngineFlags and
// AddNodeKvTransportFlags) that tandem-prefill and tandem-decode share, newline-terminated.
extern const char kNodeBackendFlagsUsage[];

// How the node's KV transport gets at the pool the backend computes in.
struct KvPoolHooks {
  // cpu and sim backends: allocates the (host) pool, registered with the transport. Unset: the
  // backend's.
  std::function<absl::StatusOr<void*>(size_t bytes)> allocate_host_pool;
  // cuda backend: registers the device pool the backend allocated
  // (KvTransport::RegisterDevicePool).
  std::function<absl::Status(void* base, size_t bytes, int cuda_device)> register_device_pool;
};

class NodeEngine {
 public:
  // Loads the model (the sim backend reads config.json only), builds the backend (its KV pool
  // through `pool_hooks`) and starts the engine thread.
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
