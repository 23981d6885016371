// The step time model of a simulated cluster's nodes, and the checks of its options
// (sim_cluster.h).
#include <climits>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/backend/sim/gpu_spec.h"
#include "common/backend/sim/sim_model_presets.h"
#include "common/model/model_config.h"
#include "common/util/status_macros.h"
#include "tools/sim/sim_cluster.h"

namespace tandem::sim {
namespace {

absl::StatusOr<ModelConfig> ModelShape(const std::string& model, const char* flag) {
  absl::StatusOr<ModelConfig> preset = SimModelPreset(model);
  if (preset.ok()) return preset;
  absl::StatusOr<ModelConfig> dir = LoadModelConfig(model);
  if (dir.ok()) return dir;
  return absl::NotFoundError(absl::StrCat(flag, " ", model, ": neither a preset (",
                                          preset.status().message(), ") nor a model directory (",
                                          dir.status().message(), ")"));
}

}  // namespace

absl::StatusOr<StepTimeModel> MakeStepTimeModel(const SimClusterOptions& options,
                                                int tensor_parallel) {
  ASSIGN_OR_RETURN(GpuSpec gpu, FindGpuSpec(options.gpu));
  ASSIGN_OR_RETURN(ModelConfig model, ModelShape(options.model, "--model"));
  return StepTimeModel::Create(gpu, model,
                               tensor_parallel > 0 ? tensor_parallel : options.tensor_parallel,
                               options.kv_dtype);
}

absl::StatusOr<std::optional<StepTimeModel>> MakeDraftStepTimeModel(
    const SimClusterOptions& options) {
  if (options.draft_model.empty() || options.num_speculative_tokens == 0) return std::nullopt;
  ASSIGN_OR_RETURN(GpuSpec gpu, FindGpuSpec(options.gpu));
  ASSIGN_OR_RETURN(ModelConfig model, ModelShape(options.draft_model, "--sim-draft-model"));
  const int tp =
      options.decode_tensor_parallel > 0 ? options.decode_tensor_parallel : options.tensor_parallel;
  ASSIGN_OR_RETURN(StepTimeModel draft, StepTimeModel::Create(gpu, model, tp, options.kv_dtype));
  return draft;
}

absl::StatusOr<int32_t> KvBlocksPerNode(const SimClusterOptions& options,
                                        const StepTimeModel& model, const StepTimeModel* draft) {
  if (options.num_kv_blocks > 0) return options.num_kv_blocks;
  ASSIGN_OR_RETURN(int64_t kv_bytes, model.KvCacheBytes(options.memory_utilization));
  int64_t per_token = model.KvBytesPerToken();
  if (draft != nullptr) {
    kv_bytes -= draft->WeightBytes();
    per_token += draft->KvBytesPerToken();
  }
  const int64_t n = kv_bytes / (per_token * options.block_size);
  if (n < 1 || n > INT32_MAX) {
    return absl::FailedPreconditionError(
        absl::StrCat("the KV cache of a TP ", model.tensor_parallel(), " node would have ", n,
                     " blocks", draft != nullptr ? " beside its draft model" : ""));
  }
  return static_cast<int32_t>(n);
}

absl::Status ValidateSimClusterOptions(const SimClusterOptions& options, size_t num_requests,
                                       size_t num_arrivals) {
  if (options.num_decode < 1) return absl::InvalidArgumentError("--decode must be >= 1");
  if (options.load_poll_ms < 1) return absl::InvalidArgumentError("--load-poll-ms must be >= 1");
  const std::vector<int64_t>& polls = options.load_poll_times_ns;
  if (!polls.empty() && options.num_routers != 1) {
    return absl::InvalidArgumentError("--load-poll-times needs a single router (--routers 1)");
  }
  for (size_t k = 0; k < polls.size(); ++k) {
    if (polls[k] < 0 || (k > 0 && polls[k] < polls[k - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("--load-poll-times: time ", k + 1, " (", polls[k],
                       " ns) is negative or earlier than the one before it"));
    }
  }
  if (num_arrivals < num_requests) {
    return absl::InvalidArgumentError(
        absl::StrCat(num_requests, " requests but ", num_arrivals, " arrival times"));
  }
  if (options.tensor_parallel < 1 || options.prefill_tensor_parallel < 0 ||
      options.decode_tensor_parallel < 0) {
    return absl::InvalidArgumentError("tensor parallelism must be >= 1");
  }
  return absl::OkStatus();
}

}  // namespace tandem::sim
