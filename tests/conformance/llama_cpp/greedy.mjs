#!/usr/bin/env node
// Greedy decoding in llama.cpp (through node-llama-cpp, CPU, F32 KV cache) from token-id prompts.
//
//   node greedy.mjs --model FILE.gguf --prompts-file FILE [--max-tokens N] [--threads T]
//                   [--kv-type F32|F16|Q8_0] [--flash-attention]
//
// --kv-type: llama.cpp's KV cache type for K and V (default F32, the conformance reference; Q8_0
// is the second reference for tandem's KV cache dtypes, bench/kv_dtype/vs_llama_cpp_q8_0.sh).
// llama.cpp quantizes V only with flash attention (--flash-attention; off by default).
//
// Each line of the prompts file is a JSON array of token ids, fed as-is (no BOS is added).
// Prints one JSON line per prompt: {"prompt_token_ids", "token_ids", "margins"} where margins[i] is
// the top-1 minus top-2 logit before token i was chosen (a tie-breaking hazard when small).
// It never stops early on end-of-sequence tokens: it always returns max-tokens tokens.
import fs from "node:fs";
import { loadLlama } from "./llama_loader.mjs";

function parseArgs(argv) {
  const args = { maxTokens: 24, threads: 1, kvType: "F32", flashAttention: false };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === "--model") args.model = next();
    else if (a === "--prompts-file") args.promptsFile = next();
    else if (a === "--max-tokens") args.maxTokens = Number(next());
    else if (a === "--threads") args.threads = Number(next());
    else if (a === "--kv-type") args.kvType = next();
    else if (a === "--flash-attention") args.flashAttention = true;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!args.model || !args.promptsFile) {
    throw new Error("usage: greedy.mjs --model FILE.gguf --prompts-file FILE [--max-tokens N] [--threads T]");
  }
  return args;
}

export function readTokenPrompts(file) {
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l.trim()).map((line, i) => {
    const v = JSON.parse(line);
    if (!Array.isArray(v) || v.length === 0 || !v.every(Number.isInteger)) {
      throw new Error(`${file}:${i + 1}: expected a non-empty JSON array of token ids`);
    }
    return v;
  });
}

// The greedy choice and its margin from the two highest logits.
function topTwo(logits) {
  const [[token, first], second] = [...logits.entries()];
  return { token, margin: second ? first - second[1] : Infinity };
}

const nextOptions = { generateNext: { token: true, options: { temperature: 0 }, logits: { filter: { tokens: [], includeTop: 2 } } } };

// Evaluates `input` (token ids) on `sequence` and returns the greedy next token and its margin.
async function step(sequence, input) {
  const items = input.map((t, i) => (i === input.length - 1 ? [t, nextOptions] : t));
  const out = await sequence.controlledEvaluate(items);
  const next = out[input.length - 1]?.next;
  if (!next?.logits) throw new Error("llama.cpp returned no logits");
  const { token, margin } = topTwo(next.logits);
  if (next.token != null && next.token !== token && margin > 0) {
    throw new Error(`sampled token ${next.token} is not the argmax ${token}`);
  }
  return { token, margin };
}

export async function greedy({
  model: modelPath, prompts, maxTokens, threads, kvType = "F32", flashAttention = false,
}) {
  const llama = await loadLlama();
  const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: true });
  const longest = Math.max(...prompts.map((p) => p.length));
  const context = await model.createContext({
    contextSize: longest + maxTokens + 8,
    batchSize: Math.max(512, longest),
    threads,
    sequences: 1,
    flashAttention,
    experimentalKvCacheKeyType: kvType,
    experimentalKvCacheValueType: kvType,
  });
  const sequence = context.getSequence();
  const results = [];
  for (const prompt of prompts) {
    await sequence.clearHistory();
    const tokenIds = [];
    const margins = [];
    let input = prompt;
    for (let i = 0; i < maxTokens; ++i) {
      const { token, margin } = await step(sequence, input);
      tokenIds.push(token);
      margins.push(margin);
      input = [token];
    }
    results.push({ prompt_token_ids: prompt, token_ids: tokenIds, margins });
  }
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  return results;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const prompts = readTokenPrompts(args.promptsFile);
  const results = await greedy({ ...args, prompts });
  for (const r of results) {
    r.margins = r.margins.map((m) => Number(m.toFixed(4)));
    console.log(JSON.stringify(r));
  }
}

main().catch((e) => {
  console.error(`greedy: ${e.message}`);
  process.exit(1);
});
