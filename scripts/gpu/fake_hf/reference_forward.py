"""A pure-Python forward pass of transformers' LlamaForCausalLM, Qwen2ForCausalLM and
Qwen3ForCausalLM (modeling_llama.py / modeling_qwen2.py / modeling_qwen3.py, eager attention),
for the fake torch/transformers that let compare_transformers.py's transformers path run where
torch is not installed (compare_transformers_test.py). Slow (about 1M multiply-adds per token on
the reference models, a few seconds per hundred tokens) but exact to f64; with rounding="hf_bf16"
it rounds to bf16 where transformers running in bf16 does (ROUNDING_SITES below; "tandem_cuda":
where tandem's cuda backend does), which is how the README's bf16 noise figures were measured:

  * Linear layers: bf16 inputs and weights, f32 accumulation, output rounded to bf16 (bias added
    before the rounding, as addmm does);
  * RMSNorm: computed in f32 on the bf16 input, rounded to bf16, then times the weight, rounded;
  * RoPE: cos/sin rounded to bf16, q*cos and rotate_half(q)*sin each rounded, their sum rounded;
  * eager attention: scores rounded, times the scale rounded, softmax in f32 rounded to bf16, the
    weighted sum of V rounded;
  * SiLU, the gate*up product and the residual additions each rounded.

Everything else (accumulation, softmax internals) is f64 here, f32 in transformers: at most a few
1e-7 relative, far below bf16's 2^-9.
"""

import array
import json
import math
import os
import struct


def read_safetensors(path):
    """{name: (shape, flat list of floats)} from a safetensors file of bf16/f16/f32 tensors."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        raw = bytes(body[begin:end])
        if meta["dtype"] == "BF16":
            wide = bytearray(len(raw) * 2)
            wide[2::4] = raw[0::2]
            wide[3::4] = raw[1::2]
            values = array.array("f", bytes(wide)).tolist()
        elif meta["dtype"] == "F32":
            values = array.array("f", raw).tolist()
        elif meta["dtype"] == "F16":
            values = list(struct.unpack(f"<{len(raw) // 2}e", raw))
        else:
            raise ValueError(f"{path}: {name} has dtype {meta['dtype']}")
        tensors[name] = (meta["shape"], values)
    return tensors


def round_bf16(values):
    """Round-to-nearest-even to bf16 (through f32), as a list of floats."""
    bits = array.array("I", array.array("f", values).tobytes())
    rounded = array.array("I", (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16 & 0xFFFFFFFF
                                for u in bits))
    return array.array("f", rounded.tobytes()).tolist()


def rope_inv_freq(config, head_dim):
    theta = config.get("rope_theta", 10000.0)
    inv = [1.0 / theta ** (i / head_dim) for i in range(0, head_dim, 2)]
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return inv
    if kind != "llama3":
        raise ValueError(f"rope type {kind} is not emulated")
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    out = []
    for f in inv:
        wavelen = 2 * math.pi / f
        scaled = f / factor if wavelen > low_wavelen else f
        if high_wavelen <= wavelen <= low_wavelen:
            smooth = (old / wavelen - low) / (high - low)
            scaled = (1 - smooth) * scaled / factor + smooth * scaled
        out.append(scaled)
    return out


# Where activations round to bf16 (round_bf16), by emulation:
#   None          nowhere: f64 throughout (transformers in f32, to ~1e-7);
#   "hf_bf16"     transformers in bf16 (the list in the module docstring);
#   "tandem_cuda" tandem's cuda backend as common/backend/cuda/cuda_backend.cc writes it: f32
#                 residual stream and QKV GEMM output; RMSNorm outputs, q/k/v after the f32 RoPE
#                 (the KV pool is bf16), attention probabilities and output, the O, gate/up and
#                 down GEMM outputs and the SwiGLU output in bf16 (an estimate of its noise only:
#                 its kernels' internal orders are not emulated).
ROUNDING_SITES = {
    None: frozenset(),
    "hf_bf16": frozenset({"qkv", "o", "gate_up", "down", "norm_mid", "norm_out", "qk_norm",
                          "rope_cs", "rope_mul", "rope_sum", "scores", "probs", "attn_out",
                          "act", "act_up", "residual"}),
    "tandem_cuda": frozenset({"norm_out", "q_k_v", "probs", "attn_out", "o", "gate_up", "down",
                              "act_up"}),
}


class ReferenceModel:
    """One model folder's weights; hidden_states() gives the final normed hidden state per
    position, reusing the K/V of the longest previously computed prefix."""

    def __init__(self, model_dir, rounding=None):
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            self.config = c = json.load(f)
        self.arch = c["architectures"][0]
        self.sites = ROUNDING_SITES[rounding]
        self.w = {k: v[1] for k, v in
                  read_safetensors(os.path.join(model_dir, "model.safetensors")).items()}
        self.shapes = {}
        self.hidden = c["hidden_size"]
        self.heads, self.kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
        self.head_dim = c.get("head_dim") or self.hidden // self.heads
        self.eps = c["rms_norm_eps"]
        self.layers = c["num_hidden_layers"]
        self.inv_freq = rope_inv_freq(c, self.head_dim)
        if c.get("tie_word_embeddings") and "lm_head.weight" not in self.w:
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        self.cache = []  # (tokens, k[layer][pos], v[layer][pos], out[pos])

    def r(self, values, site):
        return round_bf16(values) if site in self.sites else values

    def rows(self, name, cols):
        flat = self.w[name]
        return [flat[i:i + cols] for i in range(0, len(flat), cols)]

    def matrix(self, name, cols):
        key = (id(self.w[name]), cols)  # a tied LM head shares the embedding's rows
        if key not in self.shapes:
            self.shapes[key] = self.rows(name, cols)
        return self.shapes[key]

    def linear(self, name, x, site):
        rows = self.matrix(name + ".weight", len(x))
        y = [sum(map(float.__mul__, row, x)) for row in rows]
        bias = self.w.get(name + ".bias")
        if bias is not None:
            y = [a + b for a, b in zip(y, bias)]
        return self.r(y, site)

    def rms_norm(self, name, x, mid="norm_mid", out="norm_out"):
        scale = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + self.eps)
        normed = self.r([v * scale for v in x], mid)
        return self.r([a * b for a, b in zip(self.w[name], normed)], out)

    def rope(self, x, pos):
        half = self.head_dim // 2
        ang = [pos * f for f in self.inv_freq]
        cos = self.r([math.cos(a) for a in ang] * 2, "rope_cs")
        sin = self.r([math.sin(a) for a in ang] * 2, "rope_cs")
        rot = [-v for v in x[half:]] + x[:half]
        x_cos = self.r([v * c for v, c in zip(x, cos)], "rope_mul")
        rot_sin = self.r([v * s for v, s in zip(rot, sin)], "rope_mul")
        return self.r([a + b for a, b in zip(x_cos, rot_sin)], "rope_sum")

    def heads_of(self, flat, n):
        d = self.head_dim
        return [flat[h * d:(h + 1) * d] for h in range(n)]

    def position(self, token, pos, ks, vs):
        """The final normed hidden state at `pos`; appends this position's K/V to ks/vs."""
        x = self.w["model.embed_tokens.weight"][token * self.hidden:(token + 1) * self.hidden]
        group, scale = self.heads // self.kv_heads, self.head_dim ** -0.5
        for layer in range(self.layers):
            p = f"model.layers.{layer}."
            h = self.rms_norm(p + "input_layernorm.weight", x)
            q = self.heads_of(self.linear(p + "self_attn.q_proj", h, "qkv"), self.heads)
            k = self.heads_of(self.linear(p + "self_attn.k_proj", h, "qkv"), self.kv_heads)
            v = self.heads_of(self.linear(p + "self_attn.v_proj", h, "qkv"), self.kv_heads)
            if self.arch == "Qwen3ForCausalLM":
                q = [self.rms_norm(p + "self_attn.q_norm.weight", t, "qk_norm", "qk_norm")
                     for t in q]
                k = [self.rms_norm(p + "self_attn.k_norm.weight", t, "qk_norm", "qk_norm")
                     for t in k]
            q = [self.r(self.rope(t, pos), "q_k_v") for t in q]
            k = [self.r(self.rope(t, pos), "q_k_v") for t in k]
            v = [self.r(t, "q_k_v") for t in v]
            ks[layer].append(k)
            vs[layer].append(v)
            out = []
            for head in range(self.heads):
                g = head // group
                scores = self.r([sum(map(float.__mul__, q[head], kk[g])) for kk in ks[layer]],
                                "scores")
                scores = self.r([s * scale for s in scores], "scores")
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                total = sum(e)
                probs = self.r([v_ / total for v_ in e], "probs")
                out += self.r([sum(pr * vv[g][i] for pr, vv in zip(probs, vs[layer]))
                               for i in range(self.head_dim)], "attn_out")
            attn = self.linear(p + "self_attn.o_proj", out, "o")
            x = self.r([a + b for a, b in zip(x, attn)], "residual")
            h = self.rms_norm(p + "post_attention_layernorm.weight", x)
            gate = self.linear(p + "mlp.gate_proj", h, "gate_up")
            up = self.linear(p + "mlp.up_proj", h, "gate_up")
            act = self.r([g_ / (1.0 + math.exp(-g_)) for g_ in gate], "act")
            mlp = self.linear(p + "mlp.down_proj", self.r([a * b for a, b in zip(act, up)],
                                                          "act_up"), "down")
            x = self.r([a + b for a, b in zip(x, mlp)], "residual")
        return self.rms_norm("model.norm.weight", x)

    def hidden_states(self, tokens):
        tokens = list(tokens)
        best, reuse = None, 0
        for entry in self.cache:
            n = 0
            for a, b in zip(entry[0], tokens):
                if a != b:
                    break
                n += 1
            if n > reuse:
                best, reuse = entry, n
        ks = [list(best[1][layer][:reuse]) if best else [] for layer in range(self.layers)]
        vs = [list(best[2][layer][:reuse]) if best else [] for layer in range(self.layers)]
        out = list(best[3][:reuse]) if best else []
        for pos in range(reuse, len(tokens)):
            out.append(self.position(tokens[pos], pos, ks, vs))
        self.cache = ([e for e in self.cache if e is not best] + [(tokens, ks, vs, out)])[-6:]
        return out

    def lm_head(self):
        return self.matrix("lm_head.weight", self.hidden)
