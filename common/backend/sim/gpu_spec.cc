#include "common/backend/sim/gpu_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

GpuSpec H100Sxm() {
  GpuSpec g;
  g.name = "h100";
  g.peak_bf16_flops = 989e12;
  g.hbm_bytes_per_s = 3.35e12;
  g.memory_bytes = 81559 * kMiB;
  g.allreduce_bytes_per_s = 360e9;
  return g;
}

GpuSpec H200() {
  GpuSpec g = H100Sxm();
  g.name = "h200";
  g.hbm_bytes_per_s = 4.8e12;
  g.memory_bytes = 143771 * kMiB;
  return g;
}

GpuSpec A100() {
  GpuSpec g;
  g.name = "a100";
  g.peak_bf16_flops = 312e12;
  g.hbm_bytes_per_s = 2.039e12;
  g.memory_bytes = 81920 * kMiB;
  g.allreduce_bytes_per_s = 230e9;
  g.step_overhead_s = 0.0007;
  return g;
}

}  // namespace

std::vector<std::string> GpuSpecNames() { return {"h100", "h200", "a100"}; }

absl::StatusOr<GpuSpec> FindGpuSpec(std::string_view name) {
  if (name == "h100" || name == "h100-sxm") return H100Sxm();
  if (name == "h200") return H200();
  if (name == "a100" || name == "a100-80gb") return A100();
  return absl::NotFoundError(absl::StrCat("unknown GPU '", std::string(name),
                                          "' (one of: ", absl::StrJoin(GpuSpecNames(), ", "), ")"));
}

}  // namespace tandem
