// A node's model, backend (cpu; cuda when built with CUDA; sim) and running engine, built from
// the flags every node shares.
#ifndef TANDEM_COMMON_SERVING_NODE_ENGINE_H_
#define TANDEM_COMMON_SERVING_NODE_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/backend/backend.h"
#include "common/backend/backend_kind.h"
#include "common/engine/engine.h"
#include "common/kv/kv_dtype.h"
#include "common/util/cli_flags.h"

namespace tandem {

// --backend cpu: the host's cores.
struct CpuNodeOptions {
  int num_threads = 0;  // --threads; 0: all cores
};

// --backend cuda: one GPU.
struct CudaNodeOptions {
  int device = 0;         // --cuda-device
  int max_model_len = 0;  // --max-model-len: longest context to size for; 0: the model's
  bool graphs = true;     // --no-cuda-graphs clears it: replay decode steps as CUDA graphs
};

// --backend sim (common/backend/sim): the GPU and model shape it stands for.
struct SimNodeOptions {
  std::string gpu = "h100";         // --sim-gpu
  std::string model;                // --sim-model: a preset (llama-3.1-8b); "": DIR's shape
  int tensor_parallel = 1;          // --sim-tp
  int kv_scale = 1;                 // --sim-kv-scale: the pool keeps 1/N of real KV bytes
  double memory_utilization = 0.9;  // --sim-memory-utilization
  double time_scale = 1.0;          // --sim-time-scale
  int kv_blocks = 0;                // --sim-kv-blocks: > 0: this many instead of what fits
};

struct NodeEngineOptions {
  std::string model_dir;
  std::string served_model_name;  // "": the model directory's base name
  std::string node_id;            // shown in every log line; "": none
  BackendKind backend = BackendKind::kCpu;
  // Only the options of `backend` are read.
  CpuNodeOptions cpu;
  CudaNodeOptions cuda;
  SimNodeOptions sim;
  // The engine's, whatever the backend (the sim sizes its pool from memory_utilization or
  // kv_blocks, not kv_cache_mib).
  int block_size = 16;
  int kv_cache_mib = 256;
  int num_kv_blocks = 0;  // > 0: this many blocks instead of kv_cache_mib (a draft's pool); no flag
  // --kv-cache-dtype: auto (f32 on cpu, bf16 on cuda and sim), f32, bf16 or fp8_e4m3; prefill and
  // decode nodes must match.
  KvCacheDType kv_cache_dtype;
  int max_num_batched_tokens = 512;
  int max_num_seqs = 64;
  bool enable_prefix_caching = true;
  // --speculative, --num-speculative-tokens, --ngram-min/max: decode and colocated nodes (a
  // prefill node computes no output tokens to speculate on).
  SpeculativeOptions speculative;
  // The engine's step observer (EngineOptions::on_step), e.g. NodeEngineMetrics; not a flag.
  std::function<void(const EngineStepStats&)> on_step;
};

// Declares the flags of every field above (--model, --backend, --cuda-*, --sim-*, --threads,
// --kv-cache-mb, --kv-cache-dtype, ...) with their --help lines, under the sections "Node",
// "Backend" and "Engine".
void AddNodeEngineFlags(FlagSet& flags, NodeEngineOptions* options);

// Where a node binary serves, besides its engine. The values set before AddNodeServerFlags are the
// defaults --help shows.
struct NodeServerOptions {
  std::string listen;                // --listen: the gRPC HOST:PORT (port 0: any free port)
  std::string metrics_listen;        // --metrics-listen: Prometheus /metrics; "": none
  std::string ready_file;            // --ready-file: written once serving
  int64_t drain_timeout_ms = 30000;  // --drain-timeout-ms: in-flight requests' time on SIGTERM
};

// Declares --listen, --metrics-listen, --drain-timeout-ms and --ready-file in the "Node" section.
void AddNodeServerFlags(FlagSet& flags, NodeServerOptions* options);

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
