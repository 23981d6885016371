#!/usr/bin/env node
// A deliberately plain f32 forward pass of a Hugging Face Llama/Mistral/Qwen2/Qwen3 directory,
// written from the Hugging Face modeling semantics (half-split RoPE, llama3 frequency scaling,
// q/k biases, q/k RMSNorm, GQA, tied embeddings). A debugging aid for the GGUF converter:
// when llama.cpp and tandem disagree, this third opinion says which side is wrong.
// Only for tiny models: it is single-threaded and unoptimized.
//
//   node reference_forward.mjs --model HF_DIR --prompts-file FILE [--max-tokens N]
// Prints the same JSON lines as greedy.mjs.
import fs from "node:fs";
import path from "node:path";
import { listTensors, readF32 } from "./safetensors.mjs";

// Hugging Face's rope initialisation, including its llama3 and linear scaling.
function inverseFrequencies(hp) {
  const invFreq = new Float64Array(hp.headDim / 2).map((_, i) => Math.pow(hp.theta, -(2 * i) / hp.headDim));
  const s = hp.scaling;
  const type = s && (s.rope_type ?? s.type);
  if (type === "linear") return invFreq.map((f) => f / s.factor);
  if (type !== "llama3") return invFreq;
  const { factor, low_freq_factor: low, high_freq_factor: high, original_max_position_embeddings: oldCtx } = s;
  return invFreq.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    const scaled = wavelen > oldCtx / low ? f / factor : f;
    const isMedium = !(wavelen < oldCtx / high) && !(wavelen > oldCtx / low);
    if (!isMedium) return scaled;
    const smooth = (oldCtx / wavelen - low) / (high - low);
    return ((1 - smooth) * scaled) / factor + smooth * scaled;
  });
}

function loadModel(dir) {
  const c = JSON.parse(fs.readFileSync(path.join(dir, "config.json"), "utf8"));
  const st = listTensors(dir);
  const w = (name) => (st.has(name) ? readF32(st.get(name)) : null);
  const heads = c.num_attention_heads;
  const hp = {
    hidden: c.hidden_size, heads, kvHeads: c.num_key_value_heads ?? heads, vocab: c.vocab_size,
    headDim: c.head_dim ?? c.hidden_size / heads, ffn: c.intermediate_size, eps: c.rms_norm_eps ?? 1e-6,
    theta: c.rope_theta ?? 10000, scaling: c.rope_scaling ?? null,
  };
  const layers = [];
  for (let l = 0; l < c.num_hidden_layers; ++l) {
    const p = `model.layers.${l}.`;
    layers.push({
      inNorm: w(`${p}input_layernorm.weight`), postNorm: w(`${p}post_attention_layernorm.weight`),
      q: w(`${p}self_attn.q_proj.weight`), k: w(`${p}self_attn.k_proj.weight`), v: w(`${p}self_attn.v_proj.weight`),
      qb: w(`${p}self_attn.q_proj.bias`), kb: w(`${p}self_attn.k_proj.bias`), vb: w(`${p}self_attn.v_proj.bias`),
      qNorm: w(`${p}self_attn.q_norm.weight`), kNorm: w(`${p}self_attn.k_norm.weight`),
      o: w(`${p}self_attn.o_proj.weight`), ob: w(`${p}self_attn.o_proj.bias`),
      gate: w(`${p}mlp.gate_proj.weight`), up: w(`${p}mlp.up_proj.weight`), down: w(`${p}mlp.down_proj.weight`),
      kCache: [], vCache: [],
    });
  }
  const embed = w("model.embed_tokens.weight");
  const lmHead = (!c.tie_word_embeddings && w("lm_head.weight")) || embed;
  return { hp, invFreq: inverseFrequencies(hp), layers, embed, norm: w("model.norm.weight"), lmHead };
}

function matvec(W, x, rows, bias) {
  const cols = x.length;
  const y = new Float64Array(rows);
  for (let r = 0; r < rows; ++r) {
    let s = bias ? bias[r] : 0;
    for (let j = 0, o = r * cols; j < cols; ++j) s += W[o + j] * x[j];
    y[r] = s;
  }
  return y;
}

function rmsNorm(x, weight, eps, offset = 0, n = x.length) {
  let ss = 0;
  for (let i = 0; i < n; ++i) ss += x[offset + i] ** 2;
  const scale = 1 / Math.sqrt(ss / n + eps);
  for (let i = 0; i < n; ++i) x[offset + i] = x[offset + i] * scale * weight[i];
}

// Hugging Face RoPE: rotates pairs (i, i + d/2) of each head.
function rope(x, numHeads, d, pos, invFreq) {
  for (let h = 0; h < numHeads; ++h) {
    for (let i = 0; i < d / 2; ++i) {
      const a = pos * invFreq[i];
      const c = Math.cos(a), s = Math.sin(a);
      const x0 = x[h * d + i], x1 = x[h * d + i + d / 2];
      x[h * d + i] = x0 * c - x1 * s;
      x[h * d + i + d / 2] = x1 * c + x0 * s;
    }
  }
}

// Appends one token at position `pos` to every layer's cache and returns its logits.
function forwardToken(m, token, pos) {
  const { hp } = m;
  const d = hp.headDim;
  const x = Float64Array.from(m.embed.subarray(token * hp.hidden, (token + 1) * hp.hidden));
  for (const L of m.layers) {
    const h = Float64Array.from(x);
    rmsNorm(h, L.inNorm, hp.eps);
    const q = matvec(L.q, h, hp.heads * d, L.qb);
    const k = matvec(L.k, h, hp.kvHeads * d, L.kb);
    const v = matvec(L.v, h, hp.kvHeads * d, L.vb);
    if (L.qNorm) for (let i = 0; i < hp.heads; ++i) rmsNorm(q, L.qNorm, hp.eps, i * d, d);
    if (L.kNorm) for (let i = 0; i < hp.kvHeads; ++i) rmsNorm(k, L.kNorm, hp.eps, i * d, d);
    rope(q, hp.heads, d, pos, m.invFreq);
    rope(k, hp.kvHeads, d, pos, m.invFreq);
    L.kCache.push(k);
    L.vCache.push(v);
    const attn = new Float64Array(hp.heads * d);
    const group = hp.heads / hp.kvHeads;
    for (let hq = 0; hq < hp.heads; ++hq) {
      const kv = Math.floor(hq / group);
      const scores = L.kCache.map((kk) => {
        let s = 0;
        for (let i = 0; i < d; ++i) s += q[hq * d + i] * kk[kv * d + i];
        return s / Math.sqrt(d);
      });
      const mx = Math.max(...scores);
      const e = scores.map((s) => Math.exp(s - mx));
      const sum = e.reduce((a, b) => a + b, 0);
      L.vCache.forEach((vv, t) => {
        for (let i = 0; i < d; ++i) attn[hq * d + i] += (e[t] / sum) * vv[kv * d + i];
      });
    }
    const o = matvec(L.o, attn, hp.hidden, L.ob);
    for (let i = 0; i < hp.hidden; ++i) x[i] += o[i];
    const h2 = Float64Array.from(x);
    rmsNorm(h2, L.postNorm, hp.eps);
    const g = matvec(L.gate, h2, hp.ffn);
    const u = matvec(L.up, h2, hp.ffn);
    for (let i = 0; i < hp.ffn; ++i) g[i] = (g[i] / (1 + Math.exp(-g[i]))) * u[i];
    const dn = matvec(L.down, g, hp.hidden);
    for (let i = 0; i < hp.hidden; ++i) x[i] += dn[i];
  }
  rmsNorm(x, m.norm, hp.eps);
  return matvec(m.lmHead, x, hp.vocab);
}

function argmaxWithMargin(logits) {
  let best = 0, second = -Infinity;
  for (let i = 1; i < logits.length; ++i) {
    if (logits[i] > logits[best]) {
      second = logits[best];
      best = i;
    } else if (logits[i] > second) {
      second = logits[i];
    }
  }
  return { token: best, margin: logits[best] - second };
}

function main() {
  const args = { maxTokens: 24 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    if (argv[i] === "--model") args.model = argv[i + 1];
    else if (argv[i] === "--prompts-file") args.promptsFile = argv[i + 1];
    else if (argv[i] === "--max-tokens") args.maxTokens = Number(argv[i + 1]);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!args.model || !args.promptsFile) throw new Error("usage: reference_forward.mjs --model DIR --prompts-file FILE [--max-tokens N]");
  const prompts = fs.readFileSync(args.promptsFile, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  const m = loadModel(args.model);
  for (const prompt of prompts) {
    for (const L of m.layers) [L.kCache, L.vCache] = [[], []];
    let logits;
    prompt.forEach((t, pos) => (logits = forwardToken(m, t, pos)));
    const tokenIds = [], margins = [];
    for (let i = 0; i < args.maxTokens; ++i) {
      const { token, margin } = argmaxWithMargin(logits);
      tokenIds.push(token);
      margins.push(Number(margin.toFixed(4)));
      logits = forwardToken(m, token, prompt.length + i);
    }
    console.log(JSON.stringify({ prompt_token_ids: prompt, token_ids: tokenIds, margins }));
  }
}

try {
  main();
} catch (e) {
  console.error(`reference_forward: ${e.message}`);
  process.exit(1);
}
