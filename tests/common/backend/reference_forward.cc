#include "tests/common/backend/reference_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "common/util/half.h"

namespace tandem::testing {
namespace {

using Vec = std::vector<double>;

Vec ToDouble(const TensorView& t) {
  Vec out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype == DType::kF32) {
      float f;
      std::memcpy(&f, t.data + i * 4, 4);
      out[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + i * 2, 2);
      out[i] = t.dtype == DType::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
    }
  }
  return out;
}

// y = W x (+ b) with W [rows, cols].
Vec Linear(const Vec& w, const Vec* b, const Vec& x, size_t rows) {
  const size_t cols = x.size();
  Vec y(rows);
  for (size_t r = 0; r < rows; ++r) {
    double s = b != nullptr ? (*b)[r] : 0.0;
    for (size_t c = 0; c < cols; ++c) s += w[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

Vec RmsNorm(const double* x, const Vec& w, size_t n, double eps) {
  double ms = 0;
  for (size_t i = 0; i < n; ++i) ms += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ms / n + eps);
  Vec y(n);
  for (size_t i = 0; i < n; ++i) y[i] = w[i] * x[i] * r;
  return y;
}

void Rope(double* head, const Vec& inv_freq, int pos) {
  const size_t half = inv_freq.size();
  for (size_t i = 0; i < half; ++i) {
    const double angle = pos * inv_freq[i];
    const double c = std::cos(angle), s = std::sin(angle);
    const double a = head[i], b = head[i + half];
    head[i] = a * c - b * s;         // x * cos + rotate_half(x) * sin, first half: -x2
    head[i + half] = b * c + a * s;  // second half: +x1
  }
}

struct Layer {
  Vec in_norm, wq, wk, wv, bq, bk, bv, qn, kn, wo, bo, post_norm, wg, wu, wd;
};

}  // namespace

std::vector<double> ReferenceInvFreq(const ModelConfig& c) {
  const int d = c.head_dim;
  std::vector<double> inv(d / 2);
  for (int i = 0; i < d / 2; ++i)
    inv[i] = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / d);
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScaling::Type::kLinear) {
    for (double& f : inv) f /= s.factor;
  } else if (s.type == RopeScaling::Type::kLlama3) {
    const double old = s.original_max_position_embeddings;
    const double low_wavelen = old / s.low_freq_factor;
    const double high_wavelen = old / s.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen < high_wavelen) continue;  // high frequency: unchanged
      if (wavelen > low_wavelen) {           // low frequency: slowed by factor
        f /= s.factor;
        continue;
      }
      const double smooth =
          (old / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv;
}

std::vector<std::vector<double>> ReferenceLogits(const ModelWeights& weights,
                                                 std::span<const TokenId> tokens) {
  const ModelConfig& c = weights.config;
  const size_t h = c.hidden_size, hd = c.head_dim, heads = c.num_heads, kvh = c.num_kv_heads;
  const size_t n = tokens.size(), inter = c.intermediate_size, vocab = c.vocab_size;
  const size_t group = heads / kvh;
  const Vec inv_freq = ReferenceInvFreq(c);
  const Vec embed = ToDouble(weights.embed_tokens);
  const Vec lm_head = c.tie_word_embeddings ? embed : ToDouble(weights.lm_head);
  const Vec final_norm = ToDouble(weights.norm);

  std::vector<Vec> x(n);
  for (size_t p = 0; p < n; ++p)
    x[p] = Vec(embed.begin() + tokens[p] * h, embed.begin() + (tokens[p] + 1) * h);

  for (const LayerWeights& lw : weights.layers) {
    Layer L{ToDouble(lw.input_layernorm), ToDouble(lw.q_proj), ToDouble(lw.k_proj),
            ToDouble(lw.v_proj)};
    if (c.attention_bias) {
      L.bq = ToDouble(lw.q_bias);
      L.bk = ToDouble(lw.k_bias);
      L.bv = ToDouble(lw.v_bias);
    }
    if (c.qk_norm) {
      L.qn = ToDouble(lw.q_norm);
      L.kn = ToDouble(lw.k_norm);
    }
    L.wo = ToDouble(lw.o_proj);
    const bool o_bias = c.attention_bias && c.architecture != Architecture::kQwen2;
    if (o_bias) L.bo = ToDouble(lw.o_bias);
    L.post_norm = ToDouble(lw.post_attention_layernorm);
    L.wg = ToDouble(lw.gate_proj);
    L.wu = ToDouble(lw.up_proj);
    L.wd = ToDouble(lw.down_proj);
    const bool bias = c.attention_bias;

    std::vector<Vec> q(n), k(n), v(n);
    for (size_t p = 0; p < n; ++p) {
      const Vec hn = RmsNorm(x[p].data(), L.in_norm, h, c.rms_norm_eps);
      q[p] = Linear(L.wq, bias ? &L.bq : nullptr, hn, heads * hd);
      k[p] = Linear(L.wk, bias ? &L.bk : nullptr, hn, kvh * hd);
      v[p] = Linear(L.wv, bias ? &L.bv : nullptr, hn, kvh * hd);
      for (size_t hh = 0; hh < heads; ++hh) {
        if (c.qk_norm) {
          const Vec r = RmsNorm(&q[p][hh * hd], L.qn, hd, c.rms_norm_eps);
          std::copy(r.begin(), r.end(), q[p].begin() + hh * hd);
        }
        Rope(&q[p][hh * hd], inv_freq, static_cast<int>(p));
      }
      for (size_t hh = 0; hh < kvh; ++hh) {
        if (c.qk_norm) {
          const Vec r = RmsNorm(&k[p][hh * hd], L.kn, hd, c.rms_norm_eps);
          std::copy(r.begin(), r.end(), k[p].begin() + hh * hd);
        }
        Rope(&k[p][hh * hd], inv_freq, static_cast<int>(p));
      }
    }
    for (size_t p = 0; p < n; ++p) {
      Vec attn(heads * hd, 0.0);
      const size_t first = c.sliding_window > 0 && p + 1 > static_cast<size_t>(c.sliding_window)
                               ? p + 1 - c.sliding_window
                               : 0;
      for (size_t hh = 0; hh < heads; ++hh) {
        const size_t g = hh / group;
        Vec scores;
        for (size_t j = first; j <= p; ++j) {
          double s = 0;
          for (size_t d = 0; d < hd; ++d) s += q[p][hh * hd + d] * k[j][g * hd + d];
          scores.push_back(s / std::sqrt(static_cast<double>(hd)));
        }
        const double max = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (double& s : scores) sum += (s = std::exp(s - max));
        for (size_t j = first; j <= p; ++j) {
          for (size_t d = 0; d < hd; ++d) {
            attn[hh * hd + d] += scores[j - first] / sum * v[j][g * hd + d];
          }
        }
      }
      const Vec o = Linear(L.wo, o_bias ? &L.bo : nullptr, attn, h);
      for (size_t i = 0; i < h; ++i) x[p][i] += o[i];
      const Vec hn = RmsNorm(x[p].data(), L.post_norm, h, c.rms_norm_eps);
      const Vec gate = Linear(L.wg, nullptr, hn, inter);
      const Vec up = Linear(L.wu, nullptr, hn, inter);
      Vec act(inter);
      for (size_t i = 0; i < inter; ++i) act[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      const Vec down = Linear(L.wd, nullptr, act, h);
      for (size_t i = 0; i < h; ++i) x[p][i] += down[i];
    }
  }
  std::vector<Vec> logits(n);
  for (size_t p = 0; p < n; ++p) {
    logits[p] =
        Linear(lm_head, nullptr, RmsNorm(x[p].data(), final_norm, h, c.rms_norm_eps), vocab);
  }
  return logits;
}

}  // namespace tandem::testing
