#include "common/backend/cpu_weights.h"

#include "absl/strings/str_cat.h"
#include "common/backend/weight_arena.h"
#include "common/util/status_macros.h"

namespace tandem {

absl::StatusOr<CpuWeights> PackCpuWeights(const ModelWeights& weights, ThreadPool& pool) {
  ASSIGN_OR_RETURN(WeightArenaPlan plan, WeightArenaPlan::Create(weights));
  CpuWeights out;
  if (!out.arena.Reset(plan.elements())) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", plan.elements() * 4, " bytes for the f32 weights"));
  }
  plan.FillF32(out.arena.data(), pool);
  const float* base = out.arena.data();
  out.embed = base + plan.embed();
  out.final_norm = base + plan.final_norm();
  out.lm_head = base + plan.lm_head();
  for (const LayerArenaOffsets& o : plan.layers()) {
    CpuLayerWeights l;
    l.input_norm = base + o.input_norm;
    l.wqkv = base + o.wqkv;
    l.bqkv = o.has_bias ? base + o.bqkv : nullptr;
    l.q_norm = o.has_qk_norm ? base + o.q_norm : nullptr;
    l.k_norm = o.has_qk_norm ? base + o.k_norm : nullptr;
    l.wo = base + o.wo;
    l.bo = o.has_o_bias ? base + o.bo : nullptr;
    l.post_norm = base + o.post_norm;
    l.w_gate_up = base + o.w_gate_up;
    l.w_down = base + o.w_down;
    out.layers.push_back(l);
  }
  return out;
}

}  // namespace tandem
