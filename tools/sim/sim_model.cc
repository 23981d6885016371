// The step time model of a simulated cluster's nodes (sim_cluster.h).
#include "absl/strings/str_cat.h"
#include "common/backend/sim/gpu_spec.h"
#include "common/backend/sim/sim_model_presets.h"
#include "common/model/model_config.h"
#include "common/util/status_macros.h"
#include "tools/sim/sim_cluster.h"

namespace tandem::sim {
namespace {

absl::StatusOr<ModelConfig> ModelShape(const std::string& model) {
  absl::StatusOr<ModelConfig> preset = SimModelPreset(model);
  if (preset.ok()) return preset;
  absl::StatusOr<ModelConfig> dir = LoadModelConfig(model);
  if (dir.ok()) return dir;
  return absl::NotFoundError(absl::StrCat("--model ", model, ": neither a preset (",
                                          preset.status().message(), ") nor a model directory (",
                                          dir.status().message(), ")"));
}

}  // namespace

absl::StatusOr<StepTimeModel> MakeStepTimeModel(const SimClusterOptions& options,
                                                int tensor_parallel) {
  ASSIGN_OR_RETURN(GpuSpec gpu, FindGpuSpec(options.gpu));
  ASSIGN_OR_RETURN(ModelConfig model, ModelShape(options.model));
  return StepTimeModel::Create(gpu, model,
                               tensor_parallel > 0 ? tensor_parallel : options.tensor_parallel,
                               options.kv_dtype);
}

}  // namespace tandem::sim
