#!/usr/bin/env node
// Converts a Hugging Face Llama / Mistral / Qwen2 / Qwen3 model directory into a GGUF v3 file that
// llama.cpp loads, so llama.cpp can serve as an independent reference for tandem.
//
//   node hf_to_gguf.mjs --model DIR --out FILE.gguf [--outtype f32|auto] [--pre llama-bpe|qwen2]
//
// --outtype f32 (default) writes every tensor as F32 (bf16/f16 inputs convert exactly);
// auto keeps f16 matrices as F16. Norms, biases and rope factors are always F32.
//
// Conventions followed (llama.cpp's, learned from its GGUF docs and loader):
// - Llama/Mistral become architecture "llama", whose RoPE rotates interleaved pairs (2i, 2i+1);
//   Hugging Face rotates halves (i, i + d/2), so each head's Q and K rows are reordered
//   half-split -> interleaved. Qwen2/Qwen3 use llama.cpp's NEOX RoPE (halves): no reordering.
// - GGUF dims list the fastest-varying dimension first: a PyTorch [out, in] weight is [in, out].
// - llama3 rope scaling is stored as per-frequency divisors in "rope_freqs.weight".
// - Tied embeddings: no "output.weight"; llama.cpp reuses token_embd.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { listTensors, readRaw, toF32 } from "./safetensors.mjs";
import { GgmlType, ValueType, arr, bool, f32, str, u32, writeGguf } from "./gguf_writer.mjs";

const TokenType = Object.freeze({ NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 });

function parseArgs(argv) {
  const args = { outtype: "f32" };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--model") args.model = next();
    else if (a === "--out") args.out = next();
    else if (a === "--outtype") args.outtype = next();
    else if (a === "--pre") args.pre = next();
    else if (a === "--help" || a === "-h") args.help = true;
    else throw new Error(`unknown argument ${a}`);
  }
  return args;
}

const readJson = (file) => JSON.parse(fs.readFileSync(file, "utf8"));
const readJsonIfExists = (file) => (fs.existsSync(file) ? readJson(file) : {});

function ggufArchitecture(config) {
  const name = (config.architectures ?? [])[0] ?? "";
  const type = config.model_type ?? "";
  if (name === "LlamaForCausalLM" || name === "MistralForCausalLM" || type === "llama" || type === "mistral") {
    return "llama";
  }
  if (name === "Qwen2ForCausalLM" || type === "qwen2") return "qwen2";
  if (name === "Qwen3ForCausalLM" || type === "qwen3") return "qwen3";
  throw new Error(`unsupported architecture ${name || type || "(none)"}`);
}

// Hyper-parameters, with Hugging Face's defaults filled in.
function hyperParams(config) {
  const heads = config.num_attention_heads;
  const hp = {
    vocab: config.vocab_size,
    hidden: config.hidden_size,
    ffn: config.intermediate_size,
    layers: config.num_hidden_layers,
    heads,
    kvHeads: config.num_key_value_heads ?? heads,
    headDim: config.head_dim ?? config.hidden_size / heads,
    ctx: config.max_position_embeddings ?? 4096,
    eps: config.rms_norm_eps ?? 1e-6,
    theta: config.rope_theta ?? 10000,
    scaling: config.rope_scaling ?? null,
    tied: Boolean(config.tie_word_embeddings),
  };
  for (const [k, v] of Object.entries(hp)) {
    if (v === undefined || Number.isNaN(v)) throw new Error(`config.json: missing ${k}`);
  }
  if (!Number.isInteger(hp.headDim) || hp.headDim % 2) throw new Error(`config.json: bad head_dim ${hp.headDim}`);
  return hp;
}

// Hugging Face's llama3 frequency adjustment, expressed as llama.cpp's per-frequency divisors
// (llama.cpp computes theta_i = pos * base^(-2i/d) / rope_freqs[i]).
export function llama3RopeFactors(hp) {
  const s = hp.scaling;
  const factor = s.factor ?? 8.0;
  const low = s.low_freq_factor ?? 1.0;
  const high = s.high_freq_factor ?? 4.0;
  const oldCtx = s.original_max_position_embeddings ?? 8192;
  const lowWavelen = oldCtx / low;
  const highWavelen = oldCtx / high;
  const factors = new Float32Array(hp.headDim / 2);
  for (let i = 0; i < factors.length; ++i) {
    const invFreq = Math.fround(1 / Math.fround(Math.pow(hp.theta, Math.fround((2 * i) / hp.headDim))));
    const wavelen = (2 * Math.PI) / invFreq;
    if (wavelen < highWavelen) {
      factors[i] = 1;
    } else if (wavelen > lowWavelen) {
      factors[i] = factor;
    } else {
      const smooth = (oldCtx / wavelen - low) / (high - low);
      factors[i] = 1 / ((1 - smooth) / factor + smooth);
    }
  }
  return factors;
}

function ropeMetadata(arch, hp, tensors) {
  const s = hp.scaling;
  if (!s) return [];
  const type = s.rope_type ?? s.type;
  if (type === "llama3") {
    if (arch !== "llama") throw new Error(`llama3 rope scaling on ${arch} is not supported`);
    const factors = llama3RopeFactors(hp);
    tensors.push({
      name: "rope_freqs.weight", dims: [factors.length], ggmlType: GgmlType.F32,
      nbytes: factors.byteLength, data: () => Buffer.from(factors.buffer),
    });
    return [];
  }
  if (type === "linear") {
    return [[`${arch}.rope.scaling.type`, str("linear")], [`${arch}.rope.scaling.factor`, f32(s.factor)]];
  }
  if (type === "default") return [];
  throw new Error(`rope_scaling type ${type} is not supported`);
}

// Reorders each head's rows from half-split (HF) to interleaved pairs (llama.cpp's llama RoPE).
function interleaveHeadRows(raw, numHeads, headDim, rowBytes) {
  const out = Buffer.alloc(raw.length);
  const half = headDim / 2;
  for (let h = 0; h < numHeads; ++h) {
    for (let i = 0; i < half; ++i) {
      const base = h * headDim;
      raw.copy(out, (base + 2 * i) * rowBytes, (base + i) * rowBytes, (base + i + 1) * rowBytes);
      raw.copy(out, (base + 2 * i + 1) * rowBytes, (base + half + i) * rowBytes, (base + half + i + 1) * rowBytes);
    }
  }
  return out;
}

function tensorPlan(arch, hp, st, outtype) {
  const plan = [];
  const used = new Set();
  const add = (hfName, ggufName, { required = true, permuteHeads = 0 } = {}) => {
    const t = st.get(hfName);
    if (!t) {
      if (required) throw new Error(`missing tensor ${hfName}`);
      return;
    }
    used.add(hfName);
    const is2d = t.shape.length === 2;
    const keepF16 = outtype === "auto" && t.dtype === "F16" && is2d;
    const ggmlType = keepF16 ? GgmlType.F16 : GgmlType.F32;
    const numel = t.shape.reduce((a, b) => a * b, 1);
    const elemBytes = keepF16 ? 2 : 4;
    plan.push({
      name: ggufName,
      dims: [...t.shape].reverse(),
      ggmlType,
      nbytes: numel * elemBytes,
      data: () => {
        let bytes = readRaw(t);
        if (!keepF16) bytes = Buffer.from(toF32(bytes, t.dtype).buffer);
        if (permuteHeads) {
          const rowBytes = (is2d ? t.shape[1] : 1) * elemBytes;
          bytes = interleaveHeadRows(bytes, permuteHeads, hp.headDim, rowBytes);
        }
        return bytes;
      },
    });
  };
  const permute = arch === "llama";
  add("model.embed_tokens.weight", "token_embd.weight");
  for (let l = 0; l < hp.layers; ++l) {
    const p = `model.layers.${l}.`;
    const b = `blk.${l}.`;
    add(`${p}input_layernorm.weight`, `${b}attn_norm.weight`);
    for (const [proj, g, heads] of [["q", "attn_q", hp.heads], ["k", "attn_k", hp.kvHeads], ["v", "attn_v", 0]]) {
      const permuteHeads = permute ? heads : 0;
      add(`${p}self_attn.${proj}_proj.weight`, `${b}${g}.weight`, { permuteHeads });
      add(`${p}self_attn.${proj}_proj.bias`, `${b}${g}.bias`, { required: arch === "qwen2", permuteHeads });
    }
    if (arch === "qwen3") {
      add(`${p}self_attn.q_norm.weight`, `${b}attn_q_norm.weight`);
      add(`${p}self_attn.k_norm.weight`, `${b}attn_k_norm.weight`);
    }
    add(`${p}self_attn.o_proj.weight`, `${b}attn_output.weight`);
    add(`${p}self_attn.o_proj.bias`, `${b}attn_output.bias`, { required: false });
    add(`${p}post_attention_layernorm.weight`, `${b}ffn_norm.weight`);
    add(`${p}mlp.gate_proj.weight`, `${b}ffn_gate.weight`);
    add(`${p}mlp.up_proj.weight`, `${b}ffn_up.weight`);
    add(`${p}mlp.down_proj.weight`, `${b}ffn_down.weight`);
  }
  add("model.norm.weight", "output_norm.weight");
  if (!hp.tied) add("lm_head.weight", "output.weight");
  else used.add("lm_head.weight");
  const unused = [...st.keys()].filter((n) => !used.has(n) && !n.endsWith("rotary_emb.inv_freq"));
  if (unused.length) throw new Error(`tensors not understood: ${unused.slice(0, 5).join(", ")}`);
  return plan;
}

function tokenString(v) {
  if (v == null) return null;
  return typeof v === "string" ? v : v.content ?? null;
}

// "llama-bpe" (digits in groups of up to 3) or "qwen2" (single digits), read off the split regex.
function detectPre(tokenizer) {
  const text = JSON.stringify(tokenizer.pre_tokenizer ?? {});
  if (text.includes("\\\\p{N}{1,3}")) return "llama-bpe";
  if (text.includes("\\\\p{N}|")) return "qwen2";
  throw new Error("cannot tell the pre-tokenizer from tokenizer.json; pass --pre llama-bpe|qwen2");
}

function tokenizerMetadata(modelDir, config, hp, preOverride) {
  const tokenizer = readJson(path.join(modelDir, "tokenizer.json"));
  const tokConfig = readJsonIfExists(path.join(modelDir, "tokenizer_config.json"));
  if (tokenizer.model?.type !== "BPE") throw new Error(`tokenizer.json: model type ${tokenizer.model?.type} is not BPE`);
  const idToToken = new Map();
  for (const [tok, id] of Object.entries(tokenizer.model.vocab)) idToToken.set(id, tok);
  const added = new Map();
  for (const t of tokenizer.added_tokens ?? []) {
    idToToken.set(t.id, t.content);
    added.set(t.id, t);
  }
  let maxId = -1;
  for (const id of idToToken.keys()) maxId = Math.max(maxId, id);
  if (hp.vocab <= maxId) throw new Error(`config vocab_size ${hp.vocab} is smaller than the tokenizer (${maxId + 1})`);
  const tokens = new Array(hp.vocab);
  const types = new Array(hp.vocab);
  for (let i = 0; i < hp.vocab; ++i) {
    const tok = idToToken.get(i);
    if (tok === undefined) {
      tokens[i] = `[PAD${i}]`;
      types[i] = TokenType.UNUSED;
    } else {
      tokens[i] = tok;
      const a = added.get(i);
      types[i] = !a ? TokenType.NORMAL : a.special ? TokenType.CONTROL : TokenType.USER_DEFINED;
    }
  }
  const merges = tokenizer.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
  const tokenId = (name) => {
    const s = tokenString(tokConfig[name]);
    if (s == null) return null;
    const id = tokens.indexOf(s);
    return id >= 0 ? id : null;
  };
  const firstId = (v) => (Array.isArray(v) ? v[0] : v) ?? null;
  const bos = tokenId("bos_token") ?? firstId(config.bos_token_id);
  const eos = tokenId("eos_token") ?? firstId(config.eos_token_id);
  const pad = tokenId("pad_token");
  const post = tokenizer.post_processor;
  const template = post?.type === "TemplateProcessing" ? post : (post?.processors ?? []).find((p) => p.type === "TemplateProcessing");
  const addBos = template ? "SpecialToken" in (template.single?.[0] ?? {}) : Boolean(tokConfig.add_bos_token);
  const md = [
    ["tokenizer.ggml.model", str("gpt2")],
    ["tokenizer.ggml.pre", str(preOverride ?? detectPre(tokenizer))],
    ["tokenizer.ggml.tokens", arr(ValueType.STRING, tokens)],
    ["tokenizer.ggml.token_type", arr(ValueType.I32, types)],
    ["tokenizer.ggml.merges", arr(ValueType.STRING, merges)],
  ];
  if (bos != null) md.push(["tokenizer.ggml.bos_token_id", u32(bos)]);
  if (eos != null) md.push(["tokenizer.ggml.eos_token_id", u32(eos)]);
  if (pad != null) md.push(["tokenizer.ggml.padding_token_id", u32(pad)]);
  md.push(["tokenizer.ggml.add_bos_token", bool(addBos)]);
  if (typeof tokConfig.chat_template === "string") md.push(["tokenizer.chat_template", str(tokConfig.chat_template)]);
  return md;
}

export function convert({ model, out, outtype = "f32", pre }) {
  if (outtype !== "f32" && outtype !== "auto") throw new Error(`--outtype must be f32 or auto, not ${outtype}`);
  const config = readJson(path.join(model, "config.json"));
  const arch = ggufArchitecture(config);
  const hp = hyperParams(config);
  const st = listTensors(model);
  const tensors = tensorPlan(arch, hp, st, outtype);
  const ropeMd = ropeMetadata(arch, hp, tensors);
  const anyF16 = tensors.some((t) => t.ggmlType === GgmlType.F16);
  const metadata = [
    ["general.architecture", str(arch)],
    ["general.name", str(path.basename(path.resolve(model)))],
    ["general.file_type", u32(anyF16 ? 1 : 0)],
    [`${arch}.vocab_size`, u32(hp.vocab)],
    [`${arch}.context_length`, u32(hp.ctx)],
    [`${arch}.embedding_length`, u32(hp.hidden)],
    [`${arch}.block_count`, u32(hp.layers)],
    [`${arch}.feed_forward_length`, u32(hp.ffn)],
    [`${arch}.attention.head_count`, u32(hp.heads)],
    [`${arch}.attention.head_count_kv`, u32(hp.kvHeads)],
    [`${arch}.attention.layer_norm_rms_epsilon`, f32(hp.eps)],
    [`${arch}.rope.freq_base`, f32(hp.theta)],
    [`${arch}.rope.dimension_count`, u32(hp.headDim)],
  ];
  if (hp.headDim * hp.heads !== hp.hidden || config.head_dim !== undefined) {
    metadata.push([`${arch}.attention.key_length`, u32(hp.headDim)]);
    metadata.push([`${arch}.attention.value_length`, u32(hp.headDim)]);
  }
  metadata.push(...ropeMd, ...tokenizerMetadata(model, config, hp, pre));
  writeGguf(out, metadata, tensors);
  return { arch, tensors: tensors.length };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    const args = parseArgs(process.argv.slice(2));
    if (args.help || !args.model || !args.out) {
      console.log("usage: node hf_to_gguf.mjs --model HF_DIR --out FILE.gguf [--outtype f32|auto] [--pre llama-bpe|qwen2]");
      process.exit(args.help ? 0 : 2);
    }
    const { arch, tensors } = convert(args);
    console.error(`wrote ${args.out}: ${arch}, ${tensors} tensors`);
  } catch (e) {
    console.error(`hf_to_gguf: ${e.message}`);
    process.exit(1);
  }
}
