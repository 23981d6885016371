// The step time model of a simulated cluster's nodes (sim_cluster.h).
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

}  // namespace tandem::sim
