#!/usr/bin/env node
// Prefill and decode throughput of llama.cpp (node-llama-cpp's prebuilt CPU build) on a GGUF,
// measured the way tandem-bench-cpu measures tandem: F32 weights, F32 KV cache, same threads.
//
//   node bench/llama_cpp_bench.mjs --model FILE.gguf [--threads 2] [--prompt-tokens 512]
//        [--decode-steps 128] [--decode-prompt-tokens 16] [--decode-batch 8] [--repeats 3]
//        [--flash-attention auto|on|off]
//
// It drives the addon's lowest-level calls (initBatch / addToBatch / decodeBatch / sampleToken on
// LlamaContext's native context) to keep JavaScript out of the timed loop as far as possible. The
// time each decode step spends outside llama_decode (building the batch, greedy sampling, the JS
// and async hops) is reported as "outside_decode_ms_per_step": an upper bound on the binding's
// overhead (tandem's timing also includes its argmax). Prints one JSON object.
import { performance } from "node:perf_hooks";
import { loadLlama } from "../tests/conformance/llama_cpp/llama_loader.mjs";

function parseArgs(argv) {
  const args = {
    threads: 2, promptTokens: 512, decodeSteps: 128, decodePromptTokens: 16, decodeBatch: 8,
    repeats: 3, flashAttention: "auto",
  };
  const numeric = {
    "--threads": "threads", "--prompt-tokens": "promptTokens", "--decode-steps": "decodeSteps",
    "--decode-prompt-tokens": "decodePromptTokens", "--decode-batch": "decodeBatch", "--repeats": "repeats",
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = argv[++i];
    if (value === undefined) throw new Error(`${a} needs a value`);
    if (a === "--model") args.model = value;
    else if (a === "--flash-attention") args.flashAttention = value;
    else if (a in numeric) args[numeric[a]] = Number(value);
    else throw new Error(`unknown argument ${a}`);
  }
  if (!args.model) throw new Error("--model FILE.gguf is required");
  return args;
}

function randomTokens(n, vocab, seed) {
  let s = BigInt(seed) * 0x9e3779b97f4a7c15n + 1n;
  const mask = (1n << 64n) - 1n;
  const out = new Uint32Array(n);
  for (let i = 0; i < n; ++i) {
    s ^= (s << 13n) & mask;
    s ^= s >> 7n;
    s ^= (s << 17n) & mask;
    out[i] = Number(s % BigInt(vocab));
  }
  return out;
}

// Thin wrapper over the native context: one batch = tokens of some sequences, logits where asked.
class NativeRunner {
  constructor(context, model, llama) {
    this.ctx = context._ctx;
    this.sampler = new llama._bindings.AddonSampler(model._model);
    this.sampler.applyConfig({ temperature: 0 });
    this.decodeSeconds = 0;
  }
  clear(seq) {
    this.ctx.removeTokenCellsFromSequence(seq, 0, -1);
  }
  // items: [{seq, pos, tokens: Uint32Array, wantLogits}] -> greedy next token per item wanting logits.
  async step(items) {
    const total = items.reduce((a, it) => a + it.tokens.length, 0);
    this.ctx.initBatch(total);
    const logitIndexes = items.map((it) => {
      const want = it.wantLogits ? Uint32Array.of(it.tokens.length - 1) : new Uint32Array(0);
      return this.ctx.addToBatch(it.seq, it.pos, it.tokens, want);
    });
    const t0 = performance.now();
    await this.ctx.decodeBatch();
    this.decodeSeconds += (performance.now() - t0) / 1e3;
    const next = [];
    for (let i = 0; i < items.length; ++i) {
      if (items[i].wantLogits) next.push(await this.ctx.sampleToken(logitIndexes[i][0], this.sampler));
    }
    return next;
  }
}

async function timePrefill(runner, a, vocab) {
  const tokens = randomTokens(a.promptTokens, vocab, 1);
  let best = Infinity;
  for (let r = 0; r < a.repeats + 1; ++r) {  // the first run warms up
    runner.clear(0);
    const t0 = performance.now();
    await runner.step([{ seq: 0, pos: 0, tokens, wantLogits: true }]);
    const s = (performance.now() - t0) / 1e3;
    if (r > 0) best = Math.min(best, s);
  }
  return best;
}

async function timeDecode(runner, a, vocab, batch) {
  const seqs = [...Array(batch).keys()];
  seqs.forEach((s) => runner.clear(s));
  let next = await runner.step(seqs.map((s) => ({
    seq: s, pos: 0, tokens: randomTokens(a.decodePromptTokens, vocab, 2 + s), wantLogits: true,
  })));
  runner.decodeSeconds = 0;
  const t0 = performance.now();
  for (let step = 0; step < a.decodeSteps; ++step) {
    const pos = a.decodePromptTokens + step;
    next = await runner.step(seqs.map((s, i) => ({ seq: s, pos, tokens: Uint32Array.of(next[i]), wantLogits: true })));
  }
  const seconds = (performance.now() - t0) / 1e3;
  return { seconds, outsideDecodeMsPerStep: (1e3 * (seconds - runner.decodeSeconds)) / a.decodeSteps };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const llama = await loadLlama();
  const t0 = performance.now();
  const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0, useMmap: true });
  const batch = Math.max(1, a.decodeBatch);
  const fa = { auto: "auto", on: true, off: false }[a.flashAttention];
  if (fa === undefined) throw new Error("--flash-attention must be auto, on or off");
  const context = await model.createContext({
    sequences: batch,
    contextSize: Math.max(a.promptTokens, a.decodePromptTokens + a.decodeSteps) + 16,
    batchSize: Math.max(a.promptTokens, batch * a.decodePromptTokens),
    threads: a.threads,
    flashAttention: fa,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
  });
  const setupSeconds = (performance.now() - t0) / 1e3;
  const vocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length;
  const runner = new NativeRunner(context, model, llama);
  const prefill = await timePrefill(runner, a, vocab);
  const d1 = await timeDecode(runner, a, vocab, 1);
  const out = {
    engine: "llama.cpp",
    binding: "node-llama-cpp 3.22.1 (prebuilt CPU)",
    model: a.model,
    threads: context.currentThreads,
    flash_attention: a.flashAttention,
    kv_cache_type: "F32",
    setup_seconds: setupSeconds,
    prefill: { tokens: a.promptTokens, seconds: prefill, tok_per_s: a.promptTokens / prefill },
    decode: {
      batch: 1, prompt_tokens: a.decodePromptTokens, steps: a.decodeSteps, seconds: d1.seconds,
      tok_per_s: a.decodeSteps / d1.seconds, ms_per_step: (1e3 * d1.seconds) / a.decodeSteps,
      outside_decode_ms_per_step: d1.outsideDecodeMsPerStep,
    },
  };
  if (a.decodeBatch > 1) {
    const db = await timeDecode(runner, a, vocab, a.decodeBatch);
    out.decode_batched = {
      batch: a.decodeBatch, prompt_tokens: a.decodePromptTokens, steps: a.decodeSteps, seconds: db.seconds,
      tok_per_s: (a.decodeBatch * a.decodeSteps) / db.seconds, ms_per_step: (1e3 * db.seconds) / a.decodeSteps,
      outside_decode_ms_per_step: db.outsideDecodeMsPerStep,
    };
  }
  runner.sampler.dispose();
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  console.log(JSON.stringify(out, null, 2));
}

main().catch((e) => {
  console.error(`llama_cpp_bench: ${e.message}`);
  process.exit(1);
});
