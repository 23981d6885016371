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
  flags.Section("Node");
  flags.String("model", &o->model_dir, {"DIR", "Hugging Face model directory"});
  flags.String("served-model-name", &o->served_model_name,
               {"NAME", "model name reported to the router (default: the dir's name)"});
  flags.String("node-id", &o->node_id, {"NAME", "name shown in log lines"});
  flags.Section("Backend");
  flags.Custom("backend",
               {"cpu|cuda|sim",
                "compute backend (default cpu; cuda needs a CUDA build and a GPU; sim models a "
                "GPU's step times, see --sim-*)"},
               [o](std::string_view value) -> std::string {
                 std::optional<BackendKind> kind = ParseBackendKind(value);
                 if (!kind.has_value()) return "expects cpu, cuda or sim";
                 o->backend = *kind;
                 return "";
               });
  flags.Number("threads", &o->cpu.num_threads,
               {"N", "CPU threads for --backend cpu (default: all cores)"});
  flags.Number("cuda-device", &o->cuda.device, {"N", "GPU for --backend cuda (default 0)"});
  flags.Number("max-model-len", &o->cuda.max_model_len,
               {"N",
                "--backend cuda: longest context to size buffers for (default: the model's "
                "max_position_embeddings)"});
  flags.Switch("no-cuda-graphs", &o->cuda.graphs, "--backend cuda: launch decode steps eagerly",
               false);
  flags.String("sim-gpu", &o->sim.gpu, {"NAME", "--backend sim: h100 (default), h200 or a100"});
  flags.String("sim-model", &o->sim.model,
               {"NAME",
                "--backend sim: llama-3.1-8b or llama-3.1-70b (default: the shape in "
                "DIR/config.json; weights are never read)"});
  flags.Number("sim-tp", &o->sim.tensor_parallel,
               {"N", "--backend sim: tensor-parallel GPUs the node stands for (default 1)"});
  flags.Number("sim-kv-scale", &o->sim.kv_scale,
               {"N",
                "--backend sim: the KV pool holds 1/N of each token's real bytes (power of two "
                "dividing head_dim; default 1)"});
  flags.Number("sim-memory-utilization", &o->sim.memory_utilization,
               {"F",
                "--backend sim: share of GPU memory for weights + KV (default 0.9); the KV block "
                "count follows from it (--kv-cache-mb is not used)"});
  flags.Number("sim-kv-blocks", &o->sim.kv_blocks,
               {"N", "--backend sim: exactly N KV blocks instead"});
  flags.Number("sim-time-scale", &o->sim.time_scale,
               {"F", "--backend sim: steps take F times the modelled time (default 1)"});
  flags.Section("Engine");
  flags.Number("kv-cache-mb", &o->kv_cache_mib, {"N", "KV pool size in MiB (default 256)"});
  flags.Custom("kv-cache-dtype",
               {std::string(kKvCacheDTypeChoices),
                "what the KV cache stores (default auto: f32 on cpu, bf16 on cuda and sim; cpu "
                "also stores bf16 and fp8_e4m3, cuda fp8_e4m3, with fp8 scales per layer and KV "
                "head calibrated at load; the sim prices any; prefill and decode nodes must "
                "match)"},
               [o](std::string_view value) -> std::string {
                 std::optional<KvCacheDType> dtype = ParseKvCacheDType(value);
                 if (!dtype.has_value()) return "expects auto, f32, bf16 or fp8_e4m3";
                 o->kv_cache_dtype = *dtype;
                 return "";
               });
  flags.Number("block-size", &o->block_size,
               {"N", "tokens per KV block (default 16; prefill and decode nodes must match)"});
  flags.Number(
      "max-num-batched-tokens", &o->max_num_batched_tokens,
      {"N", "token budget per step; on a prefill node the prefill chunk size (default 512)"});
  flags.Number("max-num-seqs", &o->max_num_seqs,
               {"N",
                "sequences running at once: prompts prefilling on a prefill node, sequences "
                "decoding on a decode node (default 64)"});
  flags.Switch("no-prefix-caching", &o->enable_prefix_caching, "disable the prefix cache", false);
  AddSpeculativeFlags(flags, &o->speculative);
}

void AddNodeServerFlags(FlagSet& flags, NodeServerOptions* o) {
  flags.Section("Node");
  flags.String("listen", &o->listen,
               {"HOST:PORT",
                absl::StrCat("gRPC address (default ", o->listen, "; port 0 = any free port)")});
  flags.String(
      "metrics-listen", &o->metrics_listen,
      {"HOST:PORT", absl::StrCat("Prometheus /metrics address (default ", o->metrics_listen,
                                 "; port 0 = any free port; \"\" = no metrics endpoint)")});
  flags.Number("drain-timeout-ms", &o->drain_timeout_ms,
               {"N", absl::StrCat("on SIGINT/SIGTERM: time in-flight requests get to finish before "
                                  "they are cancelled; health turns NOT_SERVING at once (default ",
                                  o->drain_timeout_ms, ")")});
  flags.String(
      "ready-file", &o->ready_file,
      {"PATH", "once serving, write {\"grpc\": ADDRESS, \"metrics\": ADDRESS, \"pid\": N} there"});
}

namespace {

// The sim's shape: a preset's (with DIR's vocabulary and special tokens, which the router's
// tokenizer uses), or DIR/config.json's.
absl::StatusOr<ModelConfig> SimModelConfig(const NodeEngineOptions& options) {
  ASSIGN_OR_RETURN(ModelConfig served, LoadModelConfig(options.model_dir));
  if (options.sim.model.empty()) return served;
  ASSIGN_OR_RETURN(ModelConfig shape, SimModelPreset(options.sim.model));
  if (shape.vocab_size != served.vocab_size) {
    spdlog::warn("sim: {} has a vocabulary of {} but {} serves {}; using {}", options.sim.model,
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
  const SimNodeOptions& sim = options.sim;
  SimBackendOptions o;
  o.gpu = sim.gpu;
  o.tensor_parallel = sim.tensor_parallel;
  o.block_size = options.block_size;
  o.kv_dtype = options.kv_cache_dtype.Or(DType::kBF16);
  o.memory_utilization = sim.memory_utilization;
  o.num_kv_blocks = sim.kv_blocks;
  o.kv_scale = sim.kv_scale;
  o.time_scale = sim.time_scale;
  o.kv_pool_allocator = std::move(hooks.allocate_host_pool);
  ASSIGN_OR_RETURN(std::unique_ptr<SimBackend> backend, SimBackend::Create(config, o));
  const KvLayout& layout = backend->kv_layout();
  const double real_gib = static_cast<double>(backend->real_kv_bytes_per_token()) *
                          layout.block_size * layout.num_blocks / (1 << 30);
  spdlog::info(
      "sim: {} x{} {} ({} layers, hidden {}), {:.1f} GiB weights; KV {} {} blocks of {} tokens = "
      "{:.1f} GiB real, {} MiB held (kv scale 1/{}); time scale {}",
      sim.gpu, sim.tensor_parallel, sim.model.empty() ? std::string("config.json") : sim.model,
      config.num_layers, config.hidden_size,
      static_cast<double>(backend->time_model().WeightBytes()) / (1 << 30),
      KvDTypeName(layout.dtype), layout.num_blocks, layout.block_size, real_gib,
      backend->pool_bytes() >> 20, sim.kv_scale, sim.time_scale);
  return std::unique_ptr<Backend>(std::move(backend));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const NodeEngineOptions& options,
                                                          const ModelWeights& weights,
                                                          KvPoolHooks& hooks) {
  CpuBackendOptions o;
  o.num_threads = options.cpu.num_threads;
  o.block_size = options.block_size;
  o.kv_cache_bytes = size_t{static_cast<size_t>(options.kv_cache_mib)} << 20;
  o.num_kv_blocks = options.num_kv_blocks;
  o.max_batch_tokens = options.max_num_batched_tokens;
  o.kv_dtype = options.kv_cache_dtype.Or(DType::kF32);
  o.kv_pool_allocator = std::move(hooks.allocate_host_pool);
  ASSIGN_OR_RETURN(std::unique_ptr<CpuBackend> backend, CpuBackend::Create(weights, o));
  const KvLayout& layout = backend->kv_layout();
  spdlog::info("cpu: KV {} blocks of {} tokens, {} ({} bytes per token){}", layout.num_blocks,
               layout.block_size, KvDTypeName(layout.dtype), layout.bytes_per_token(),
               layout.scale_fingerprint == 0
                   ? std::string()
                   : absl::StrCat("; fp8 scales calibrated at load, fingerprint ",
                                  absl::Hex(layout.scale_fingerprint)));
  return std::unique_ptr<Backend>(std::move(backend));
}

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const NodeEngineOptions& options,
                                                           const ModelWeights& weights,
                                                           KvPoolHooks& hooks) {
  if (!CudaStoresKvDType(options.kv_cache_dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv-cache-dtype ", KvDTypeName(*options.kv_cache_dtype.dtype), kCudaKvDTypeRefusal));
  }
#if TANDEM_HAVE_CUDA
  CudaBackendOptions o;
  o.device = options.cuda.device;
  o.block_size = options.block_size;
  o.kv_cache_bytes = size_t{static_cast<size_t>(options.kv_cache_mib)} << 20;
  o.num_kv_blocks = options.num_kv_blocks;
  o.max_batch_tokens = options.max_num_batched_tokens;
  o.max_num_seqs = options.max_num_seqs;
  o.max_context = options.cuda.max_model_len;
  o.kv_cache_dtype = options.kv_cache_dtype.Or(DType::kBF16);
  o.cuda_graphs = options.cuda.graphs;
  ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend, CudaBackend::Create(weights, o));
  if (hooks.register_device_pool) {
    RETURN_IF_ERROR(hooks.register_device_pool(backend->kv_pool(), backend->kv_pool_bytes(),
                                               backend->device()));
  }
  return std::unique_ptr<Backend>(std::move(backend));
#else
  (void)options;
  (void)weights;
  (void)hooks;
  return absl::UnimplementedError(
      "--backend cuda: this build has no CUDA (configure with TANDEM_CUDA=ON where nvcc is)");
#endif
}

// The backend `options.backend` names; the sim reads config.json only, the others the weights.
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const NodeEngineOptions& options,
                                                       KvPoolHooks& hooks) {
  if (options.backend == BackendKind::kSim) return CreateSimBackend(options, hooks);
  ASSIGN_OR_RETURN(ModelWeights weights, LoadModelWeights(options.model_dir));
  switch (options.backend) {
    case BackendKind::kCpu:
      return CreateCpuBackend(options, weights, hooks);
    case BackendKind::kCuda:
      return CreateCudaBackend(options, weights, hooks);
    case BackendKind::kSim:
      break;
  }
  return absl::InternalError("unreachable: every BackendKind is handled above");
}

// --speculative draft: the draft model on the target's backend kind, with a pool of its own that
// no transport sees (the draft's KV never leaves the node: see the README's "Speculative
// decoding" for why the decode node prefills the draft itself).
absl::StatusOr<std::unique_ptr<DraftModel>> CreateDraftModel(const NodeEngineOptions& options,
                                                             const Backend& target) {
  if (options.backend == BackendKind::kSim) {
    return absl::InvalidArgumentError(
        "--speculative draft needs the cpu or cuda backend (the sim backend models drafts with "
        "--speculative sim)");
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<DraftModel> draft,
      LoadDraftModel(options.speculative.draft_model_dir, options.model_dir, target,
                     options.max_num_batched_tokens, options.max_num_seqs,
                     [&options](int32_t blocks) -> absl::StatusOr<std::unique_ptr<Backend>> {
                       ASSIGN_OR_RETURN(ModelWeights weights,
                                        LoadModelWeights(options.speculative.draft_model_dir));
                       NodeEngineOptions draft_options = options;
                       draft_options.num_kv_blocks = blocks;
                       KvPoolHooks no_transport;
                       return draft_options.backend == BackendKind::kCuda
                                  ? CreateCudaBackend(draft_options, weights, no_transport)
                                  : CreateCpuBackend(draft_options, weights, no_transport);
                     }));
  return draft;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeEngine>> NodeEngine::Create(const NodeEngineOptions& options,
                                                               KvPoolHooks pool_hooks) {
  if (options.model_dir.empty()) return absl::InvalidArgumentError("--model DIR is required");
  if (options.kv_cache_mib < 1) {
    return absl::InvalidArgumentError("--kv-cache-mb must be at least 1");
  }
  RETURN_IF_ERROR(options.speculative.Validate());
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
  ASSIGN_OR_RETURN(node->backend_, CreateBackend(options, pool_hooks));
  EngineOptions engine_options;
  engine_options.scheduler.max_num_batched_tokens = options.max_num_batched_tokens;
  engine_options.scheduler.max_num_seqs = options.max_num_seqs;
  engine_options.enable_prefix_caching = options.enable_prefix_caching;
  engine_options.speculative = options.speculative;
  if (options.speculative.method == SpeculativeMethod::kSim) {
    if (const auto* sim = dynamic_cast<const SimBackend*>(node->backend_.get()); sim != nullptr) {
      engine_options.draft_proposer =
          [rate = options.speculative.sim_acceptance_rate, limit = sim->token_limit()](
              std::span<const TokenId> context, int32_t max_drafts, std::vector<TokenId>* drafts) {
            SimBackend::ProposeDrafts(context, max_drafts, rate, limit, drafts);
          };
    }
  }
  if (options.speculative.method == SpeculativeMethod::kDraft) {
    ASSIGN_OR_RETURN(engine_options.draft_model, CreateDraftModel(options, *node->backend_));
  }
  engine_options.on_step = options.on_step;
  ASSIGN_OR_RETURN(node->engine_, Engine::Create(node->backend_.get(), engine_options));
  node->engine_->Start();
  return node;
}

NodeEngine::~NodeEngine() {
  if (engine_ != nullptr) engine_->Stop();
}

}  // namespace tandem
