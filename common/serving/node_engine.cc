#include "common/serving/node_engine.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/backend/cpu_backend.h"
#include "common/backend/sim/sim_backend.h"
#include "common/backend/sim/sim_model_presets.h"
#include "common/model/model_weights.h"
#include "common/util/status_macros.h"
#include "spdlog/spdlog.h"
#if TANDEM_HAVE_CUDA
#include "common/backend/cuda/cuda_backend.h"
#endif

namespace tandem {

void AddNodeEngineFlags(FlagSet& flags, NodeEngineOptions* o) {
  flags.String("model", &o->model_dir);
  flags.String("served-model-name", &o->served_model_name);
  flags.String("node-id", &o->node_id);
  flags.String("backend", &o->backend);
  flags.Number("cuda-device", &o->cuda_device);
  flags.Number("max-model-len", &o->max_model_len);
  flags.Switch("no-cuda-graphs", &o->cuda_graphs, false);
  flags.String("sim-gpu", &o->sim_gpu);
  flags.String("sim-model", &o->sim_model);
  flags.Number("sim-tp", &o->sim_tensor_parallel);
  flags.Number("sim-kv-scale", &o->sim_kv_scale);
  flags.Number("sim-memory-utilization", &o->sim_memory_utilization);
  flags.Number("sim-time-scale", &o->sim_time_scale);
  flags.Number("sim-kv-blocks", &o->sim_kv_blocks);
  flags.Number("threads", &o->num_threads);
  flags.Number("block-size", &o->block_size);
  flags.Number("kv-cache-mb", &o->kv_cache_mib);
  flags.Number("max-num-batched-tokens", &o->max_num_batched_tokens);
  flags.Number("max-num-seqs", &o->max_num_seqs);
  flags.Switch("no-prefix-caching", &o->enable_prefix_caching, false);
}

namespace {

// The sim's shape: a preset's (with DIR's vocabulary and special tokens, which the router's
// tokenizer uses), or DIR/config.json's.
absl::StatusOr<ModelConfig> SimModelConfig(const NodeEngineOptions& options) {
  ASSIGN_OR_RETURN(ModelConfig served, LoadModelConfig(options.model_dir));
  if (options.sim_model.empty()) return served;
  ASSIGN_OR_RETURN(ModelConfig shape, SimModelPreset(options.sim_model));
  if (shape.vocab_size != served.vocab_size) {
    spdlog::warn("sim: {} has a vocabulary of {} but {} serves {}; using {}", options.sim_model,
                 shape.vocab_size, options.model_dir, served.vocab_size, served.vocab_size);
  }
  shape.vocab_size = served.vocab_size;
  shape.bos_token_id = served.bos_token_id;
  shape.eos_token_ids = served.eos_token_ids;
  return shape;
}

absl::StatusOr<std::unique_ptr<Backend>> CreateSimBackend(const NodeEngineOptions& options,
                                                          KvPoolHooks& hooks) {
  ASSIGN_OR_RETURN(ModelConfig config, SimModelConfig(options));
  SimBackendOptions o;
  o.gpu = options.sim_gpu;
  o.tensor_parallel = options.sim_tensor_parallel;
  o.block_size = options.block_size;
  o.memory_utilization = options.sim_memory_utilization;
  o.num_kv_blocks = options.sim_kv_blocks;
  o.kv_scale = options.sim_kv_scale;
  o.time_scale = options.sim_time_scale;
  o.kv_pool_allocator = std::move(hooks.allocate_host_pool);
  ASSIGN_OR_RETURN(std::unique_ptr<SimBackend> backend, SimBackend::Create(config, o));
  const KvLayout& layout = backend->kv_layout();
  const double real_gib = static_cast<double>(backend->real_kv_bytes_per_token()) *
                          layout.block_size * layout.num_blocks / (1 << 30);
  spdlog::info(
      "sim: {} x{} {} ({} layers, hidden {}), {:.1f} GiB weights; KV {} blocks of {} tokens = "
      "{:.1f} GiB real, {} MiB held (kv scale 1/{}); time scale {}",
      options.sim_gpu, options.sim_tensor_parallel,
      options.sim_model.empty() ? std::string("config.json") : options.sim_model, config.num_layers,
      config.hidden_size, static_cast<double>(backend->time_model().WeightBytes()) / (1 << 30),
      layout.num_blocks, layout.block_size, real_gib, backend->pool_bytes() >> 20,
      options.sim_kv_scale, options.sim_time_scale);
  return std::unique_ptr<Backend>(std::move(backend));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const NodeEngineOptions& options,
                                                       const ModelWeights& weights,
                                                       KvPoolHooks& hooks) {
  const size_t kv_cache_bytes = size_t{static_cast<size_t>(options.kv_cache_mib)} << 20;
  if (options.backend == "cpu") {
    CpuBackendOptions o;
    o.num_threads = options.num_threads;
    o.block_size = options.block_size;
    o.kv_cache_bytes = kv_cache_bytes;
    o.max_batch_tokens = options.max_num_batched_tokens;
    o.kv_pool_allocator = std::move(hooks.allocate_host_pool);
    ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend, CpuBackend::Create(weights, o));
    return std::unique_ptr<Backend>(std::move(backend));
  }
  if (options.backend == "cuda") {
#if TANDEM_HAVE_CUDA
    CudaBackendOptions o;
    o.device = options.cuda_device;
    o.block_size = options.block_size;
    o.kv_cache_bytes = kv_cache_bytes;
    o.max_batch_tokens = options.max_num_batched_tokens;
    o.max_num_seqs = options.max_num_seqs;
    o.max_context = options.max_model_len;
    o.cuda_graphs = options.cuda_graphs;
    ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend, CudaBackend::Create(weights, o));
    if (hooks.register_device_pool) {
      RETURN_IF_ERROR(hooks.register_device_pool(backend->kv_pool(), backend->kv_pool_bytes(),
                                                 backend->device()));
    }
    return std::unique_ptr<Backend>(std::move(backend));
#else
    return absl::UnimplementedError(
        "--backend cuda: this build has no CUDA (configure with TANDEM_CUDA=ON where nvcc is)");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--backend must be cpu, cuda or sim, not '", options.backend, "'"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeEngine>> NodeEngine::Create(const NodeEngineOptions& options,
                                                               KvPoolHooks pool_hooks) {
  if (options.model_dir.empty()) return absl::InvalidArgumentError("--model DIR is required");
  if (options.kv_cache_mib < 1) {
    return absl::InvalidArgumentError("--kv-cache-mb must be at least 1");
  }
  if (!options.node_id.empty()) {
    spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [" + options.node_id + "] [%l] %v");
  }
  auto node = std::unique_ptr<NodeEngine>(new NodeEngine());
  node->model_name_ = options.served_model_name;
  if (node->model_name_.empty()) {
    node->model_name_ =
        std::filesystem::path(options.model_dir).lexically_normal().filename().string();
    if (node->model_name_.empty()) {
      node->model_name_ =
          std::filesystem::path(options.model_dir).lexically_normal().parent_path().filename();
    }
  }
  if (options.backend == "sim") {
    ASSIGN_OR_RETURN(node->backend_, CreateSimBackend(options, pool_hooks));
  } else {
    ASSIGN_OR_RETURN(ModelWeights weights, LoadModelWeights(options.model_dir));
    ASSIGN_OR_RETURN(node->backend_, CreateBackend(options, weights, pool_hooks));
  }
  EngineOptions engine_options;
  engine_options.scheduler.max_num_batched_tokens = options.max_num_batched_tokens;
  engine_options.scheduler.max_num_seqs = options.max_num_seqs;
  engine_options.enable_prefix_caching = options.enable_prefix_caching;
  engine_options.on_step = options.on_step;
  ASSIGN_OR_RETURN(node->engine_, Engine::Create(node->backend_.get(), engine_options));
  node->engine_->Start();
  return node;
}

NodeEngine::~NodeEngine() {
  if (engine_ != nullptr) engine_->Stop();
}

const char kNodeBackendFlagsUsage[] =
    R"(  --backend cpu|cuda|sim        compute backend (default cpu; cuda needs a CUDA build and a GPU;
                                sim models a GPU's step times, see below)
  --cuda-device N               GPU for --backend cuda (default 0)
  --max-model-len N             --backend cuda: longest context to size buffers for (default: the
                                model's max_position_embeddings)
  --no-cuda-graphs              --backend cuda: launch decode steps eagerly
  --sim-gpu NAME                --backend sim: h100 (default), h200 or a100
  --sim-model NAME              --backend sim: llama-3.1-8b or llama-3.1-70b (default: the shape
                                in DIR/config.json; weights are never read)
  --sim-tp N                    --backend sim: tensor-parallel GPUs the node stands for (default 1)
  --sim-kv-scale N              --backend sim: the KV pool holds 1/N of each token's real bytes
                                (power of two dividing head_dim; default 1)
  --sim-memory-utilization F    --backend sim: share of GPU memory for weights + KV (default 0.9);
                                the KV block count follows from it (--kv-cache-mb is not used)
  --sim-kv-blocks N             --backend sim: exactly N KV blocks instead
  --sim-time-scale F            --backend sim: steps take F times the modelled time (default 1)
  --kv-transport KIND           auto (default: ucx for --backend cpu, cuda for --backend cuda),
                                ucx, cuda (device pools: CUDA IPC on one host, staged through
                                pinned memory between hosts) or nccl (needs two GPUs)
  --kv-interface NAME[,NAME]    network interfaces UCX may use (UCX_NET_DEVICES); default: the
                                one that owns --listen's address, or all for 0.0.0.0
  --kv-port-range LO-HI         TCP ports UCX's tcp transport listens on (default: any)
  --cluster-secret-file PATH    secret shared by every prefill and decode node (>= 32 bytes):
                                KV handoffs and completions carry its HMAC, and a prefill node
                                writes nothing for a handoff that does not verify (required on
                                prefill nodes; a decode node without it refuses Reserve and
                                serves colocated requests only)
  --insecure-no-handoff-auth    run without the secret (anyone who reaches a node's gRPC port
                                can then direct where KV is written); experiments only
)";

}  // namespace tandem
