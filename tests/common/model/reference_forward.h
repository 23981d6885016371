// A deliberately plain f32 forward pass of a Llama-family model, for tests: no KV cache, no
// batching, no threads; each step written the way Hugging Face transformers computes it.
//
//   embed -> per layer [RMSNorm -> q/k/v (+bias) -> (Qwen3 q/k RMSNorm) -> RoPE (rotate_half:
//   pairs (i, i + head_dim/2), llama3/linear scaling) -> causal GQA attention (optional sliding
//   window) -> o_proj (+bias) -> residual -> RMSNorm -> SwiGLU MLP -> residual] -> RMSNorm -> LM
//   head
//
// Header-only so any test can include it ("tests/common/model/reference_forward.h").
#ifndef TANDEM_TESTS_COMMON_MODEL_REFERENCE_FORWARD_H_
#define TANDEM_TESTS_COMMON_MODEL_REFERENCE_FORWARD_H_

#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "common/model/model_weights.h"
#include "common/model/safetensors.h"
#include "common/model/tensor.h"
#include "common/types/dtype.h"

namespace tandem::testing {

class ReferenceModel {
 public:
  // `tensors`: f32 values by Hugging Face name, as ExpectedTensors(config) lists them.
  ReferenceModel(ModelConfig config, std::map<std::string, std::vector<float>> tensors)
      : c_(std::move(config)), t_(std::move(tensors)) {
    for (const TensorSpec& spec : ExpectedTensors(c_)) {
      if (!t_.count(spec.name)) throw std::invalid_argument("missing tensor " + spec.name);
    }
    InitRope();
  }

  // Converts every tensor of loaded weights to f32.
  static ReferenceModel FromWeights(const ModelWeights& w) {
    std::map<std::string, std::vector<float>> tensors;
    for (const TensorSpec& spec : ExpectedTensors(w.config)) {
      TensorView v = *w.store->Get(spec.name);
      std::vector<float> f(static_cast<size_t>(v.numel()));
      ConvertToF32(v, f.data());
      tensors[spec.name] = std::move(f);
    }
    return ReferenceModel(w.config, std::move(tensors));
  }

  const ModelConfig& config() const { return c_; }
  // RoPE inverse frequencies (head_dim / 2 of them) after scaling.
  const std::vector<double>& inv_freq() const { return inv_freq_; }

  // Logits [tokens.size() x vocab] for positions 0..T-1 of one causal sequence.
  std::vector<float> Forward(std::span<const TokenId> tokens) const {
    const int T = static_cast<int>(tokens.size()), H = c_.hidden_size;
    const std::vector<float>& embed = W("model.embed_tokens.weight");
    std::vector<float> x(static_cast<size_t>(T) * H);
    for (int t = 0; t < T; ++t) {
      std::copy_n(&embed[static_cast<size_t>(tokens[t]) * H], H, &x[static_cast<size_t>(t) * H]);
    }
    for (int l = 0; l < c_.num_layers; ++l) Layer(l, T, x);
    std::vector<float> xn = RmsNorm(x, T, H, W("model.norm.weight"));
    const std::string head =
        c_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    return Linear(xn, T, H, W(head), c_.vocab_size);
  }

 private:
  const std::vector<float>& W(const std::string& name) const { return t_.at(name); }
  const std::vector<float>* Maybe(const std::string& name) const {
    auto it = t_.find(name);
    return it == t_.end() ? nullptr : &it->second;
  }

  static float Dot(const float* a, const float* b, int n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
    }
    float s = 0;
    for (; i < n; ++i) s += a[i] * b[i];
    for (float v : acc) s += v;
    return s;
  }

  // y[T x out] = x[T x in] * w[out x in]^T (+ bias)
  static std::vector<float> Linear(const std::vector<float>& x, int T, int in,
                                   const std::vector<float>& w, int out,
                                   const std::vector<float>* bias = nullptr) {
    std::vector<float> y(static_cast<size_t>(T) * out);
    for (int t = 0; t < T; ++t) {
      for (int o = 0; o < out; ++o) {
        y[static_cast<size_t>(t) * out + o] =
            Dot(&x[static_cast<size_t>(t) * in], &w[static_cast<size_t>(o) * in], in) +
            (bias ? (*bias)[o] : 0.0f);
      }
    }
    return y;
  }

  // Each of `rows` rows of width n: x / sqrt(mean(x^2) + eps) * w.
  std::vector<float> RmsNorm(const std::vector<float>& x, int rows, int n,
                             const std::vector<float>& w) const {
    std::vector<float> y(x.size());
    for (int r = 0; r < rows; ++r) {
      const float* xr = &x[static_cast<size_t>(r) * n];
      double ss = 0;
      for (int i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + c_.rms_norm_eps));
      for (int i = 0; i < n; ++i) y[static_cast<size_t>(r) * n + i] = xr[i] * inv * w[i];
    }
    return y;
  }

  // Hugging Face's inverse frequencies, including llama3 and linear scaling.
  void InitRope() {
    const int half = c_.head_dim / 2;
    inv_freq_.resize(half);
    const RopeScaling& rs = c_.rope_scaling;
    for (int i = 0; i < half; ++i) {
      double f = 1.0 / std::pow(static_cast<double>(c_.rope_theta), 2.0 * i / c_.head_dim);
      if (rs.type == RopeScaling::Type::kLinear) {
        f /= rs.factor;
      } else if (rs.type == RopeScaling::Type::kLlama3) {
        const double old_len = rs.original_max_position_embeddings;
        const double low_wavelen = old_len / rs.low_freq_factor;
        const double high_wavelen = old_len / rs.high_freq_factor;
        const double wavelen = 2 * M_PI / f;
        if (wavelen > low_wavelen) {
          f /= rs.factor;
        } else if (wavelen >= high_wavelen) {
          const double smooth =
              (old_len / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
          f = (1 - smooth) * f / rs.factor + smooth * f;
        }
      }
      inv_freq_[i] = f;
    }
  }

  // Rotates one head vector in place: pairs (i, i + half).
  void Rope(float* v, int pos) const {
    const int half = c_.head_dim / 2;
    for (int i = 0; i < half; ++i) {
      const double angle = pos * inv_freq_[i];
      const float cs = static_cast<float>(std::cos(angle)),
                  sn = static_cast<float>(std::sin(angle));
      const float a = v[i], b = v[i + half];
      v[i] = a * cs - b * sn;
      v[i + half] = b * cs + a * sn;
    }
  }

  void Layer(int l, int T, std::vector<float>& x) const {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int H = c_.hidden_size, hd = c_.head_dim, nh = c_.num_heads, nkv = c_.num_kv_heads;
    const int qs = c_.q_size(), kvs = c_.kv_size();
    std::vector<float> xn = RmsNorm(x, T, H, W(p + "input_layernorm.weight"));
    std::vector<float> q =
        Linear(xn, T, H, W(p + "self_attn.q_proj.weight"), qs, Maybe(p + "self_attn.q_proj.bias"));
    std::vector<float> k =
        Linear(xn, T, H, W(p + "self_attn.k_proj.weight"), kvs, Maybe(p + "self_attn.k_proj.bias"));
    std::vector<float> v =
        Linear(xn, T, H, W(p + "self_attn.v_proj.weight"), kvs, Maybe(p + "self_attn.v_proj.bias"));
    if (c_.qk_norm) {
      q = RmsNorm(q, T * nh, hd, W(p + "self_attn.q_norm.weight"));
      k = RmsNorm(k, T * nkv, hd, W(p + "self_attn.k_norm.weight"));
    }
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < nh; ++h) Rope(&q[static_cast<size_t>(t) * qs + h * hd], t);
      for (int h = 0; h < nkv; ++h) Rope(&k[static_cast<size_t>(t) * kvs + h * hd], t);
    }
    std::vector<float> attn(static_cast<size_t>(T) * qs);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    std::vector<float> scores(T);
    for (int t = 0; t < T; ++t) {
      const int first = c_.sliding_window > 0 ? std::max(0, t - c_.sliding_window + 1) : 0;
      for (int h = 0; h < nh; ++h) {
        const int g = h / (nh / nkv);
        const float* qv = &q[static_cast<size_t>(t) * qs + h * hd];
        float mx = -INFINITY;
        for (int s = first; s <= t; ++s) {
          scores[s] = Dot(qv, &k[static_cast<size_t>(s) * kvs + g * hd], hd) * scale;
          mx = std::max(mx, scores[s]);
        }
        double sum = 0;
        for (int s = first; s <= t; ++s) sum += (scores[s] = std::exp(scores[s] - mx));
        float* out = &attn[static_cast<size_t>(t) * qs + h * hd];
        for (int s = first; s <= t; ++s) {
          const float pr = static_cast<float>(scores[s] / sum);
          const float* vv = &v[static_cast<size_t>(s) * kvs + g * hd];
          for (int i = 0; i < hd; ++i) out[i] += pr * vv[i];
        }
      }
    }
    std::vector<float> o = Linear(attn, T, qs, W(p + "self_attn.o_proj.weight"), H,
                                  Maybe(p + "self_attn.o_proj.bias"));
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];

    const int I = c_.intermediate_size;
    xn = RmsNorm(x, T, H, W(p + "post_attention_layernorm.weight"));
    std::vector<float> gate = Linear(xn, T, H, W(p + "mlp.gate_proj.weight"), I);
    std::vector<float> up = Linear(xn, T, H, W(p + "mlp.up_proj.weight"), I);
    for (size_t i = 0; i < gate.size(); ++i) {
      gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }
    std::vector<float> down = Linear(gate, T, I, W(p + "mlp.down_proj.weight"), H);
    for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }

  ModelConfig c_;
  std::map<std::string, std::vector<float>> t_;
  std::vector<double> inv_freq_;
};

// Top-1 minus top-2 logit of each row of a [rows x vocab] matrix.
inline std::vector<float> TopMargins(const std::vector<float>& logits, int vocab) {
  std::vector<float> out;
  for (size_t r = 0; r + vocab <= logits.size(); r += vocab) {
    float a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < vocab; ++i) {
      const float v = logits[r + i];
      if (v > a) {
        b = a;
        a = v;
      } else if (v > b) {
        b = v;
      }
    }
    out.push_back(a - b);
  }
  return out;
}

// Index of the largest logit of each row.
inline std::vector<int> Argmax(const std::vector<float>& logits, int vocab) {
  std::vector<int> out;
  for (size_t r = 0; r + vocab <= logits.size(); r += vocab) {
    out.push_back(static_cast<int>(
        std::max_element(logits.begin() + r, logits.begin() + r + vocab) - (logits.begin() + r)));
  }
  return out;
}

inline float Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0f : v[v.size() / 2];
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_MODEL_REFERENCE_FORWARD_H_
