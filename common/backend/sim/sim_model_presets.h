// Model shapes the sim backend can stand in for without a config.json of their own
// (--sim-model): the published Hugging Face configs of Llama-3.1-8B and -70B.
#ifndef TANDEM_COMMON_BACKEND_SIM_SIM_MODEL_PRESETS_H_
#define TANDEM_COMMON_BACKEND_SIM_SIM_MODEL_PRESETS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"

namespace tandem {

// "llama-3.1-8b", "llama-3.1-70b". NotFound lists the names.
absl::StatusOr<ModelConfig> SimModelPreset(std::string_view name);
std::vector<std::string> SimModelPresetNames();

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_SIM_SIM_MODEL_PRESETS_H_
