#include "tests/kernels/reference_pass.h"

#include <cmath>

#include "common/backend/batch_validation.h"
#include "common/backend/device_forward_plan.h"
#include "common/backend/rope.h"
#include "common/backend/weight_arena.h"
#include "common/util/status_macros.h"
#include "common/util/thread_pool.h"
#include "kernels/attention_reference.h"
#include "kernels/embedding_reference.h"
#include "kernels/gemm_reference.h"
#include "kernels/rms_norm_reference.h"
#include "kernels/rope_kv_write_reference.h"
#include "kernels/swiglu_reference.h"

namespace tandem::kernels::testing {

absl::StatusOr<ReferencePass> ReferencePass::Create(const ModelWeights& weights, int block_size,
                                                    int num_blocks) {
  ASSIGN_OR_RETURN(WeightArenaPlan plan, WeightArenaPlan::Create(weights));
  ReferencePass pass;
  pass.config_ = weights.config;
  pass.arena_.resize(plan.elements());
  ThreadPool threads(1);
  plan.FillBf16(pass.arena_.data(), threads);
  pass.embed_ = plan.embed();
  pass.final_norm_ = plan.final_norm();
  pass.lm_head_ = plan.lm_head();
  for (const LayerArenaOffsets& o : plan.layers()) {
    pass.layers_.push_back({o.input_norm, o.wqkv, o.bqkv, o.q_norm, o.k_norm, o.wo, o.bo,
                            o.post_norm, o.w_gate_up, o.w_down, o.has_bias, o.has_o_bias,
                            o.has_qk_norm});
  }
  const ModelConfig& c = weights.config;
  pass.layout_ = {DType::kBF16, c.num_layers, c.num_kv_heads, c.head_dim, block_size, num_blocks};
  pass.pool_.assign(pass.layout_.total_elements(), 0);
  pass.inv_freq_ = RopeInvFreq(c);
  return pass;
}

absl::StatusOr<std::vector<float>> ReferencePass::Forward(const ForwardBatch& batch) {
  const ModelConfig& c = config_;
  int rows = 0;
  for (const ForwardItem& item : batch.items) rows += item.want_logits;
  std::vector<float> logits(static_cast<size_t>(rows) * c.vocab_size);
  RETURN_IF_ERROR(ValidateForwardBatch(batch, {logits}, c, layout_));
  DeviceForwardPlan plan;
  RETURN_IF_ERROR(BuildDeviceForwardPlan(batch, layout_.block_size, nullptr, &plan));
  const int t = plan.num_tokens;
  const int hidden = c.hidden_size, q_size = c.q_size(), qkv_size = q_size + 2 * c.kv_size();
  const int inter = c.intermediate_size;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  const Bf16Bits* w = arena_.data();
  std::vector<float> x(size_t{static_cast<size_t>(t)} * hidden), qkv(size_t{1} * t * qkv_size);
  std::vector<Bf16Bits> h(x.size()), q(size_t{1} * t * q_size), attn(q.size()), o(x.size()),
      gate_up(size_t{2} * t * inter), act(size_t{1} * t * inter), mlp_out(x.size());

  EmbeddingGatherReference(w + embed_, c.vocab_size, hidden, plan.at<int32_t>(plan.token_ids), t,
                           x.data());
  for (int l = 0; l < c.num_layers; ++l) {
    const Layer& L = layers_[l];
    RmsNormResidualReference({x.data(), l == 0 ? nullptr : mlp_out.data(), nullptr,
                              w + L.input_norm, t, hidden, c.rms_norm_eps, h.data()});
    LinearReference(h.data(), t, hidden, w + L.wqkv, qkv_size, qkv.data());
    RopeKvWriteReferenceArgs rope;
    rope.qkv = qkv.data();
    rope.qkv_bias = L.has_bias ? w + L.bqkv : nullptr;
    rope.q_norm = L.has_qk_norm ? w + L.q_norm : nullptr;
    rope.k_norm = L.has_qk_norm ? w + L.k_norm : nullptr;
    rope.eps = c.rms_norm_eps;
    rope.inv_freq = inv_freq_.data();
    rope.positions = plan.at<int32_t>(plan.positions);
    rope.slot_mapping = plan.at<int64_t>(plan.slot_mapping);
    rope.n = t;
    rope.num_heads = c.num_heads;
    rope.layout = layout_;
    rope.layer = l;
    rope.kv_pool = pool_.data();
    rope.q_out = q.data();
    RopeKvWriteReference(rope);
    if (plan.num_prefill > 0) {
      PrefillAttentionReferenceArgs a;
      a.q = q.data();
      a.out = attn.data();
      a.kv_pool = pool_.data();
      a.layout = layout_;
      a.layer = l;
      a.num_heads = c.num_heads;
      a.num_items = plan.num_prefill;
      a.q_starts = plan.at<int32_t>(plan.prefill_q_starts);
      a.q_lens = plan.at<int32_t>(plan.prefill_q_lens);
      a.start_positions = plan.at<int32_t>(plan.prefill_start_positions);
      a.block_tables = plan.at<int32_t>(plan.prefill_block_tables);
      a.max_blocks_per_seq = plan.prefill_table_width;
      a.sliding_window = c.sliding_window;
      a.scale = scale;
      PrefillAttentionReference(a);
    }
    if (plan.num_decode > 0) {
      DecodeAttentionReferenceArgs a;
      a.q = q.data();
      a.out = attn.data();
      a.kv_pool = pool_.data();
      a.layout = layout_;
      a.layer = l;
      a.num_heads = c.num_heads;
      a.num_seqs = plan.num_decode;
      a.token_rows = plan.at<int32_t>(plan.decode_token_rows);
      a.context_lens = plan.at<int32_t>(plan.decode_context_lens);
      a.block_tables = plan.at<int32_t>(plan.decode_block_tables);
      a.max_blocks_per_seq = plan.decode_table_width;
      a.sliding_window = c.sliding_window;
      a.scale = scale;
      DecodeAttentionReference(a);
    }
    // The GEMMs with bf16 output round their f32 result once.
    std::vector<float> y(size_t{static_cast<size_t>(t)} * std::max(hidden, 2 * inter));
    LinearReference(attn.data(), t, q_size, w + L.wo, hidden, y.data());
    for (size_t i = 0; i < o.size(); ++i) o[i] = FloatToBf16(y[i]);
    RmsNormResidualReference({x.data(), o.data(), L.has_o_bias ? w + L.bo : nullptr,
                              w + L.post_norm, t, hidden, c.rms_norm_eps, h.data()});
    LinearReference(h.data(), t, hidden, w + L.w_gate_up, 2 * inter, y.data());
    for (size_t i = 0; i < gate_up.size(); ++i) gate_up[i] = FloatToBf16(y[i]);
    SwiGluReference(gate_up.data(), t, inter, act.data());
    LinearReference(act.data(), t, inter, w + L.w_down, hidden, y.data());
    for (size_t i = 0; i < mlp_out.size(); ++i) mlp_out[i] = FloatToBf16(y[i]);
  }
  if (rows == 0) return logits;
  RmsNormResidualReference(
      {x.data(), mlp_out.data(), nullptr, w + final_norm_, t, hidden, c.rms_norm_eps, h.data()});
  std::vector<Bf16Bits> h_rows(size_t{static_cast<size_t>(rows)} * hidden);
  GatherRowsReference(h.data(), hidden, plan.at<int32_t>(plan.logit_rows), rows, h_rows.data());
  LinearReference(h_rows.data(), rows, hidden, w + lm_head_, c.vocab_size, logits.data());
  return logits;
}

}  // namespace tandem::kernels::testing
