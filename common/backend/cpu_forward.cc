// CpuBackend::Forward: the transformer pass over a flattened batch.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/backend/batch_validation.h"
#include "common/backend/cpu_backend.h"
#include "common/backend/cpu_gemm.h"
#include "common/backend/kv_row_ops.h"
#include "common/backend/paged_attention.h"
#include "common/backend/rope.h"
#include "common/backend/row_ops.h"
#include "common/util/status_macros.h"

namespace tandem {
namespace {

// Rows per thread below which a row-wise loop is not worth waking the pool for.
constexpr int64_t kRowGrain = 8;
// bf16/fp8 pools: an item with at least this many query rows in a layer (a prefill chunk) has
// its KV widened to f32 once for all of them (WidenChunkKv); fewer (decode) read the pool.
constexpr int kWidenMinQueryRows = 4;
// The widened copies of one layer stay under this many floats (256 MiB); items past it read the
// pool row by row (the same results, more conversions).
constexpr int64_t kWidenMaxFloats = int64_t{64} << 20;

}  // namespace

absl::Status CpuBackend::Forward(const ForwardBatch& batch, LogitsOutput out) {
  RETURN_IF_ERROR(ValidateForwardBatch(batch, out, config_, layout_));
  if (batch.items.empty()) return absl::OkStatus();
  int64_t tokens = 0;
  int64_t max_context = 0;
  for (const ForwardItem& item : batch.items) {
    tokens += static_cast<int64_t>(item.tokens.size());
    int64_t context = item.start_pos + static_cast<int64_t>(item.tokens.size());
    if (config_.sliding_window > 0) context = std::min<int64_t>(context, config_.sliding_window);
    max_context = std::max(max_context, context);
  }
  RETURN_IF_ERROR(EnsureCapacity(static_cast<int>(tokens), max_context));
  const int t = static_cast<int>(tokens);
  PlanTokens(batch);
  EmbedAndRope(batch, t);

  Scratch& s = scratch_;
  const std::span<const int32_t> all_rows(s.all_rows.data(), t);
  const std::span<const int32_t> logit_rows(s.logit_rows.data(), s.num_logit_rows);
  for (int l = 0; l < config_.num_layers; ++l) {
    // The last layer's output matters only for rows that want logits (its K/V is written for
    // every row first).
    RETURN_IF_ERROR(RunLayer(l, batch, t, l + 1 == config_.num_layers ? logit_rows : all_rows));
  }
  if (s.num_logit_rows == 0) return absl::OkStatus();

  const int hidden = config_.hidden_size;
  NormRows(weights_.final_norm, s.x.data(), s.h.data(), s.num_logit_rows);
  // logits = h · lm_headᵀ
  Gemm({.x = s.h.data(),
        .ldx = hidden,
        .rows = s.num_logit_rows,
        .k = hidden,
        .w = weights_.lm_head,
        .n = config_.vocab_size,
        .y = out.logits.data(),
        .ldy = config_.vocab_size},
       *threads_);
  return absl::OkStatus();
}

void CpuBackend::PlanTokens(const ForwardBatch& batch) {
  Scratch& s = scratch_;
  int t = 0;
  s.num_logit_rows = 0;
  for (size_t i = 0; i < batch.items.size(); ++i) {
    const ForwardItem& item = batch.items[i];
    const int n = static_cast<int>(item.tokens.size());
    for (int j = 0; j < n; ++j, ++t) {
      s.token_item[t] = static_cast<int32_t>(i);
      s.token_pos[t] = item.start_pos + j;
    }
    for (int r = LogitsRows(item); r >= 1; --r) s.logit_rows[s.num_logit_rows++] = t - r;
  }
}

void CpuBackend::EmbedAndRope(const ForwardBatch& batch, int tokens) {
  Scratch& s = scratch_;
  const int hidden = config_.hidden_size;
  const int half = config_.head_dim / 2;
  threads_->ParallelFor(
      tokens,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const ForwardItem& item = batch.items[s.token_item[t]];
          const TokenId id = item.tokens[s.token_pos[t] - item.start_pos];
          std::memcpy(s.x.data() + t * hidden, weights_.embed + int64_t{id} * hidden,
                      sizeof(float) * hidden);
          RopeCosSin(inv_freq_, s.token_pos[t], s.rope_cos.data() + t * half,
                     s.rope_sin.data() + t * half);
        }
      },
      kRowGrain);
}

void CpuBackend::NormRows(const float* w, const float* in, float* out, int rows) {
  const int hidden = config_.hidden_size;
  const float eps = config_.rms_norm_eps;
  threads_->ParallelFor(
      rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
          RmsNorm(in + r * hidden, w, hidden, eps, out + r * hidden);
      },
      kRowGrain);
}

absl::Status CpuBackend::RunLayer(int l, const ForwardBatch& batch, int tokens,
                                  std::span<const int32_t> rows) {
  const CpuLayerWeights& w = weights_.layers[l];
  Scratch& s = scratch_;
  const int hidden = config_.hidden_size;
  const int q_size = config_.q_size();
  const int qkv_size = q_size + 2 * config_.kv_size();
  const int inter = config_.intermediate_size;

  NormRows(w.input_norm, s.x.data(), s.h.data(), tokens);
  // qkv = h · Wqkvᵀ + bqkv
  Gemm({.x = s.h.data(),
        .ldx = hidden,
        .rows = tokens,
        .k = hidden,
        .w = w.wqkv,
        .n = qkv_size,
        .bias = w.bqkv,
        .y = s.qkv.data(),
        .ldy = qkv_size},
       *threads_);
  QkvPostprocess(l, batch, tokens);

  const int n = static_cast<int>(rows.size());
  if (n == 0) return absl::OkStatus();
  RETURN_IF_ERROR(WidenChunkKv(l, batch, rows));
  Attention(l, batch, rows);
  // Keep only the continuing rows, at the front of x (rows are increasing, so this is in place).
  for (int r = 0; r < n; ++r) {
    if (rows[r] != r) {
      std::memcpy(s.x.data() + int64_t{r} * hidden, s.x.data() + int64_t{rows[r]} * hidden,
                  sizeof(float) * hidden);
    }
  }

  // x += attn · Woᵀ + bo (the residual)
  Gemm({.x = s.attn.data(),
        .ldx = q_size,
        .rows = n,
        .k = q_size,
        .w = w.wo,
        .n = hidden,
        .bias = w.bo,
        .y = s.x.data(),
        .ldy = hidden,
        .accumulate = true},
       *threads_);

  NormRows(w.post_norm, s.x.data(), s.h.data(), n);
  // gate_up = h · W_gate_upᵀ
  Gemm({.x = s.h.data(),
        .ldx = hidden,
        .rows = n,
        .k = hidden,
        .w = w.w_gate_up,
        .n = 2 * inter,
        .y = s.gate_up.data(),
        .ldy = 2 * inter},
       *threads_);
  threads_->ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const float* gu = s.gate_up.data() + r * 2 * inter;
          SiluMul(gu, gu + inter, inter, s.act.data() + r * inter);
        }
      },
      kRowGrain);

  // x += act · W_downᵀ (the residual)
  Gemm({.x = s.act.data(),
        .ldx = inter,
        .rows = n,
        .k = inter,
        .w = w.w_down,
        .n = hidden,
        .y = s.x.data(),
        .ldy = hidden,
        .accumulate = true},
       *threads_);
  return absl::OkStatus();
}

void CpuBackend::QkvPostprocess(int l, const ForwardBatch& batch, int tokens) {
  const CpuLayerWeights& w = weights_.layers[l];
  Scratch& s = scratch_;
  const int hd = config_.head_dim;
  const int half = hd / 2;
  const int heads = config_.num_heads;
  const int kv_heads = config_.num_kv_heads;
  const int q_size = config_.q_size();
  const int kv_size = config_.kv_size();
  const int qkv_size = q_size + 2 * kv_size;
  const float eps = config_.rms_norm_eps;
  threads_->ParallelFor(
      tokens,
      [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          float* q = s.qkv.data() + t * qkv_size;
          float* k = q + q_size;
          const float* v = k + kv_size;
          if (w.q_norm != nullptr) {
            for (int h = 0; h < heads; ++h) RmsNorm(q + h * hd, w.q_norm, hd, eps, q + h * hd);
            for (int h = 0; h < kv_heads; ++h) RmsNorm(k + h * hd, w.k_norm, hd, eps, k + h * hd);
          }
          const float* cos = s.rope_cos.data() + t * half;
          const float* sin = s.rope_sin.data() + t * half;
          for (int h = 0; h < heads; ++h) ApplyRope(q + h * hd, cos, sin, half);
          for (int h = 0; h < kv_heads; ++h) ApplyRope(k + h * hd, cos, sin, half);
          WriteKv(l, batch, t, k, v);
        }
      },
      kRowGrain);
}

void CpuBackend::WriteKv(int l, const ForwardBatch& batch, int64_t t, const float* k,
                         const float* v) {
  const Scratch& s = scratch_;
  const int hd = config_.head_dim;
  const int kv_heads = config_.num_kv_heads;
  const int bs = layout_.block_size;
  const int pos = s.token_pos[t];
  const int block = batch.items[s.token_item[t]].block_table[pos / bs];
  const int slot = pos % bs;
  auto write = [&](auto* pool) {
    for (int h = 0; h < kv_heads; ++h) {
      const float inv_k = kv_inv_scales_.empty() ? 1.0f : kv_inv_scales_[(l * 2) * kv_heads + h];
      const float inv_v =
          kv_inv_scales_.empty() ? 1.0f : kv_inv_scales_[(l * 2 + 1) * kv_heads + h];
      kvrow::Store(k + h * hd, hd, pool + layout_.Offset(l, 0, block, h, slot), inv_k);
      kvrow::Store(v + h * hd, hd, pool + layout_.Offset(l, 1, block, h, slot), inv_v);
    }
  };
  switch (layout_.dtype) {
    case DType::kBF16:
      write(static_cast<kvrow::Bf16*>(kv_data_));
      return;
    case DType::kFP8E4M3:
      write(static_cast<kvrow::Fp8*>(kv_data_));
      return;
    case DType::kF32:
    case DType::kF16:  // refused by Create
      write(static_cast<float*>(kv_data_));
      return;
  }
}

absl::Status CpuBackend::WidenChunkKv(int l, const ForwardBatch& batch,
                                      std::span<const int32_t> rows) {
  Scratch& s = scratch_;
  const size_t items = batch.items.size();
  s.wide_layout.assign(items, KvLayout{});
  s.wide_offset.assign(items, 0);
  if (layout_.dtype == DType::kF32) return absl::OkStatus();
  std::vector<int32_t>& query_rows = s.wide_rows;
  query_rows.assign(items, 0);
  for (int32_t t : rows) ++query_rows[s.token_item[t]];
  int64_t total = 0;
  int max_blocks = 0;
  for (size_t i = 0; i < items; ++i) {
    if (query_rows[i] < kWidenMinQueryRows) continue;
    const ForwardItem& item = batch.items[i];
    KvLayout& wide = s.wide_layout[i];
    wide = layout_;
    wide.dtype = DType::kF32;
    wide.num_layers = 1;
    wide.num_blocks = static_cast<int32_t>(
        (item.start_pos + static_cast<int64_t>(item.tokens.size()) + layout_.block_size - 1) /
        layout_.block_size);
    wide.scale_fingerprint = 0;
    if (total + wide.total_elements() > kWidenMaxFloats) {
      wide.num_blocks = 0;
      continue;
    }
    s.wide_offset[i] = total;
    total += wide.total_elements();
    max_blocks = std::max(max_blocks, wide.num_blocks);
  }
  if (total == 0) return absl::OkStatus();
  if (!s.wide_kv.EnsureSize(static_cast<size_t>(total))) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", total * sizeof(float), " bytes of widened KV"));
  }
  if (static_cast<int>(s.wide_table.size()) < max_blocks) {
    s.wide_table.resize(max_blocks);
    for (int b = 0; b < max_blocks; ++b) s.wide_table[b] = b;
  }
  // One unit per (item, K|V, block): a block's K (or V) of one layer is one contiguous run.
  std::vector<std::pair<int32_t, int32_t>>& units = s.wide_units;
  units.clear();
  for (size_t i = 0; i < items; ++i) {
    for (int32_t u = 0; u < 2 * s.wide_layout[i].num_blocks; ++u) units.emplace_back(i, u);
  }
  const int64_t run = layout_.block_stride();
  threads_->ParallelFor(static_cast<int64_t>(units.size()), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const auto [i, u] = units[k];
      const KvLayout& wide = s.wide_layout[i];
      const int kv = u / wide.num_blocks;
      const int b = u % wide.num_blocks;
      const int64_t src = layout_.Offset(l, kv, batch.items[i].block_table[b], 0, 0);
      float* dst = s.wide_kv.data() + s.wide_offset[i] + wide.Offset(0, kv, b, 0, 0);
      if (layout_.dtype == DType::kBF16) {
        kvrow::Widen(static_cast<const kvrow::Bf16*>(kv_data_) + src, static_cast<int>(run), dst);
      } else {
        kvrow::Widen(static_cast<const kvrow::Fp8*>(kv_data_) + src, static_cast<int>(run), dst);
      }
    }
  });
  return absl::OkStatus();
}

void CpuBackend::Attention(int l, const ForwardBatch& batch, std::span<const int32_t> rows) {
  Scratch& s = scratch_;
  const int hd = config_.head_dim;
  const int kv_heads = config_.num_kv_heads;
  const int group = config_.num_heads / kv_heads;
  const int q_size = config_.q_size();
  const int qkv_size = q_size + 2 * config_.kv_size();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const int64_t units = static_cast<int64_t>(rows.size()) * kv_heads;
  const int threads = threads_->num_threads();
  // One call per thread (index = thread), each taking every threads-th (row, kv head) unit:
  // interleaving balances causal prefill, where later rows see more positions.
  threads_->ParallelFor(threads, [&](int64_t begin, int64_t end) {
    for (int64_t tid = begin; tid < end; ++tid) {
      float* scores = s.scores[tid].data();
      for (int64_t u = tid; u < units; u += threads) {
        const int r = static_cast<int>(u / kv_heads);
        const int g = static_cast<int>(u % kv_heads);
        const int t = rows[r];
        const ForwardItem& item = batch.items[s.token_item[t]];
        AttentionQuery query;
        query.q = s.qkv.data() + int64_t{t} * qkv_size + int64_t{g} * group * hd;
        query.group = group;
        query.kv_head = g;
        query.position = s.token_pos[t];
        const KvHeadScales head_scales =
            kv_scales_.empty() ? KvHeadScales{}
                               : KvHeadScales{kv_scales_.at(l, 0, g), kv_scales_.at(l, 1, g)};
        float* out = s.attn.data() + int64_t{r} * q_size + int64_t{g} * group * hd;
        const KvLayout& wide = s.wide_layout[s.token_item[t]];
        if (wide.num_blocks > 0) {
          query.block_table = {s.wide_table.data(), static_cast<size_t>(wide.num_blocks)};
          PagedAttention(wide, s.wide_kv.data() + s.wide_offset[s.token_item[t]], 0, query,
                         config_.sliding_window, scale, scores, out, head_scales);
        } else {
          query.block_table = item.block_table;
          PagedAttention(layout_, kv_data_, l, query, config_.sliding_window, scale, scores, out,
                         head_scales);
        }
      }
    }
  });
}

}  // namespace tandem
