#include "common/serving/node_engine.h"

#include <filesystem>

#include "common/model/model_weights.h"
#include "common/util/status_macros.h"
#include "spdlog/spdlog.h"

namespace tandem {

void AddNodeEngineFlags(FlagSet& flags, NodeEngineOptions* o) {
  flags.String("model", &o->model_dir);
  flags.String("served-model-name", &o->served_model_name);
  flags.String("node-id", &o->node_id);
  flags.Number("threads", &o->num_threads);
  flags.Number("block-size", &o->block_size);
  flags.Number("kv-cache-mb", &o->kv_cache_mib);
  flags.Number("max-num-batched-tokens", &o->max_num_batched_tokens);
  flags.Number("max-num-seqs", &o->max_num_seqs);
  flags.Switch("no-prefix-caching", &o->enable_prefix_caching, false);
}

absl::StatusOr<std::unique_ptr<NodeEngine>> NodeEngine::Create(
    const NodeEngineOptions& options,
    std::function<absl::StatusOr<void*>(size_t)> kv_pool_allocator) {
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
  ASSIGN_OR_RETURN(ModelWeights weights, LoadModelWeights(options.model_dir));
  CpuBackendOptions backend_options;
  backend_options.num_threads = options.num_threads;
  backend_options.block_size = options.block_size;
  backend_options.kv_cache_bytes = size_t{static_cast<size_t>(options.kv_cache_mib)} << 20;
  backend_options.max_batch_tokens = options.max_num_batched_tokens;
  backend_options.kv_pool_allocator = std::move(kv_pool_allocator);
  ASSIGN_OR_RETURN(node->backend_, CpuBackend::Create(weights, backend_options));
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

}  // namespace tandem
