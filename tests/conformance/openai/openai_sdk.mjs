// tandem-router's OpenAI-compatible HTTP API called by the official `openai` npm SDK (no tandem
// code), with the router's gRPC API (@grpc/grpc-js, the .proto loaded at run time) as the
// reference for greedy tokens.
//
//   node openai_sdk.mjs --http HOST:PORT --grpc HOST:PORT --api-key KEY
//
// Checks /v1/models; completions and chat, streaming and not (the streamed text and token ids
// equal the non-streamed ones, and the gRPC API's); usage with cached prompt tokens on a
// repeated prompt; stop strings; max_tokens → "length"; chat and completions logprobs; seeded
// sampling; return_token_ids; stream_options.include_usage; 32 concurrent streams; and the
// SDK's error classes for 400, 401 and 404.
//
// Prints one JSON line per check ({"check", "ok", ...}); on the first failure prints what
// differed and exits 1.
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let OpenAI;
let grpc;
let protoLoader;
try {
  OpenAI = (await import('openai')).default;
  grpc = await import('@grpc/grpc-js');
  protoLoader = await import('@grpc/proto-loader');
} catch (e) {
  console.error(`cannot load the openai / @grpc/grpc-js / @grpc/proto-loader packages ` +
                `(${e.message}): run scripts/install-deps.sh (npm install in tests/conformance)`);
  process.exit(1);
}

const here = path.dirname(fileURLToPath(import.meta.url));
const protoRoot = path.resolve(here, '../../../proto');

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i];
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${key} needs a value`);
    if (key === '--http') args.http = value;
    else if (key === '--grpc') args.grpc = value;
    else if (key === '--api-key') args.apiKey = value;
    else throw new Error(`unknown argument ${key}`);
  }
  if (!args.http || !args.grpc || !args.apiKey) {
    throw new Error('usage: node openai_sdk.mjs --http HOST:PORT --grpc HOST:PORT --api-key KEY');
  }
  return args;
}

// ---- gRPC reference ----

function grpcClient(address) {
  const definition = protoLoader.loadSync('tandem/v1/generate.proto', {
    includeDirs: [protoRoot],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const Generation = grpc.loadPackageDefinition(definition).tandem.v1.Generation;
  return new Generation(address, grpc.credentials.createInsecure());
}

// `apiKey` goes in the "authorization: Bearer KEY" metadata (the router checks it on gRPC too).
function grpcGenerate(client, request, apiKey, timeoutMs = 120000) {
  return new Promise((resolve, reject) => {
    const messages = [];
    const metadata = new grpc.Metadata();
    if (apiKey) metadata.add('authorization', `Bearer ${apiKey}`);
    const call = client.Generate(request, metadata, { deadline: Date.now() + timeoutMs });
    call.on('data', (m) => messages.push(m));
    call.on('error', reject);
    call.on('end', () => resolve(messages));
  });
}

// ---- helpers ----

// Reads a streamed response to the end: the chunks, the joined text, the token ids
// (return_token_ids), the finish_reason and the usage chunk.
async function collect(stream, chat) {
  const chunks = [];
  let text = '';
  const tokenIds = [];
  let finishReason = null;
  let usage = null;
  let promptTokenIds = null;
  const logprobs = [];
  for await (const chunk of stream) {
    chunks.push(chunk);
    if (chunk.usage) usage = chunk.usage;
    if (chunk.prompt_token_ids) promptTokenIds = chunk.prompt_token_ids;
    for (const choice of chunk.choices) {
      text += chat ? (choice.delta?.content ?? '') : (choice.text ?? '');
      if (choice.token_ids) tokenIds.push(...choice.token_ids);
      if (choice.prompt_token_ids) promptTokenIds = choice.prompt_token_ids;
      if (choice.logprobs?.content) logprobs.push(...choice.logprobs.content);
      if (choice.finish_reason) {
        assert.equal(finishReason, null, 'two chunks carry a finish_reason');
        finishReason = choice.finish_reason;
      }
    }
  }
  return { chunks, text, tokenIds, finishReason, usage, promptTokenIds, logprobs };
}

function checkUsage(usage, completionTokens) {
  assert.ok(usage, 'no usage');
  assert.ok(Number.isInteger(usage.prompt_tokens) && usage.prompt_tokens > 0,
            `usage.prompt_tokens ${usage.prompt_tokens}`);
  if (completionTokens !== undefined) {
    assert.equal(usage.completion_tokens, completionTokens, 'usage.completion_tokens');
  }
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens,
               'usage.total_tokens != prompt_tokens + completion_tokens');
  assert.ok(Number.isInteger(usage.prompt_tokens_details?.cached_tokens),
            `usage.prompt_tokens_details.cached_tokens is ${
                JSON.stringify(usage.prompt_tokens_details)}`);
}

// Runs `fn`, expects it to throw `ErrorClass` with `status`; returns the error.
async function expectError(ErrorClass, status, fn) {
  let result;
  try {
    result = await fn();
  } catch (e) {
    assert.ok(e instanceof ErrorClass,
              `expected ${ErrorClass.name}, got ${e.constructor?.name}: ${e.message}`);
    assert.equal(e.status, status, 'HTTP status');
    assert.ok(e.error && typeof e.error.message === 'string' && e.error.message.length > 0,
              `no OpenAI error body: ${JSON.stringify(e.error)}`);
    assert.ok(typeof e.error.type === 'string' && e.error.type.length > 0, 'error.type missing');
    assert.ok('param' in e.error && 'code' in e.error, 'error.param / error.code missing');
    return e;
  }
  throw new assert.AssertionError({
    message: `expected ${ErrorClass.name} (${status}), got a response: ${
        JSON.stringify(result).slice(0, 300)}`,
  });
}

// A substring of `text` to use as a stop string: 3 characters from the middle that contain no
// replacement character and are not all whitespace; null when there is none.
function pickStop(text) {
  for (let k = Math.floor(text.length / 2); k + 3 <= text.length; ++k) {
    const s = text.slice(k, k + 3);
    if (!s.includes('\uFFFD') && s.trim().length > 0 && text.indexOf(s) > 0) return s;
  }
  return null;
}

// ---- checks ----

let current = '';  // the check running now, named in the failure line

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const baseURL = `http://${args.http}/v1`;
  const client = new OpenAI({ apiKey: args.apiKey, baseURL, maxRetries: 0, timeout: 120000 });
  const grpcRouter = grpcClient(args.grpc);

  async function check(name, fn) {
    current = name;
    const started = Date.now();
    const details = (await fn()) ?? {};
    console.log(JSON.stringify({ check: name, ok: true, ms: Date.now() - started, ...details }));
  }

  // /v1/models names the served model; every request below uses that name.
  let model;
  await check('models.list', async () => {
    const page = await client.models.list();
    assert.ok(page.data.length >= 1, 'no models');
    model = page.data[0].id;
    assert.ok(typeof model === 'string' && model.length > 0, 'model id');
    assert.equal(page.data[0].object, 'model');
    assert.equal(page.data[0].owned_by, 'tandem');
    const retrieved = page.data.map((m) => m.id);
    return { models: retrieved };
  });

  // Greedy completions, not streamed and streamed, against the gRPC API.
  const prompt = 'The capital of France is';
  const greedy = { model, prompt, max_tokens: 12, temperature: 0, return_token_ids: true };
  let completion;
  await check('completions: non-streaming, greedy, max_tokens → length', async () => {
    completion = await client.completions.create(greedy);
    assert.equal(completion.object, 'text_completion');
    assert.ok(completion.id.startsWith('cmpl-'), `id ${completion.id}`);
    assert.equal(completion.model, model);
    assert.equal(completion.choices.length, 1);
    const choice = completion.choices[0];
    assert.equal(choice.index, 0);
    assert.equal(choice.finish_reason, 'length');
    assert.ok(choice.text.length > 0, 'empty text');
    assert.equal(choice.token_ids.length, 12, 'token_ids');
    assert.ok(choice.prompt_token_ids.length > 0, 'prompt_token_ids');
    checkUsage(completion.usage, 12);
    assert.equal(completion.usage.prompt_tokens, choice.prompt_token_ids.length,
                 'usage.prompt_tokens != prompt_token_ids.length');
    return { text: choice.text, token_ids: choice.token_ids };
  });

  await check('completions: streamed text and token ids equal the non-streamed', async () => {
    const s = await collect(await client.completions.create({ ...greedy, stream: true }), false);
    const choice = completion.choices[0];
    assert.equal(s.text, choice.text, 'streamed text');
    assert.deepEqual(s.tokenIds, choice.token_ids, 'streamed token_ids');
    assert.deepEqual(s.promptTokenIds, choice.prompt_token_ids, 'streamed prompt_token_ids');
    assert.equal(s.finishReason, 'length');
    assert.equal(s.usage, null, 'usage chunk without stream_options.include_usage');
    for (const c of s.chunks) assert.equal(c.object, 'text_completion');
    return { chunks: s.chunks.length };
  });

  await check('completions: token ids equal the gRPC API\'s greedy Generate', async () => {
    const messages = await grpcGenerate(grpcRouter, {
      model,
      text: prompt,
      sampling: { temperature: 0, max_tokens: 12 },
    }, args.apiKey);
    const ids = messages.flatMap((m) => m.tokens.map((t) => t.id));
    const text = messages.map((m) => m.text).join('');
    const choice = completion.choices[0];
    assert.deepEqual(choice.token_ids, ids, 'HTTP token_ids vs gRPC tokens');
    assert.deepEqual(choice.prompt_token_ids, messages[0].prompt_token_ids,
                     'HTTP prompt_token_ids vs gRPC prompt_token_ids');
    assert.equal(choice.text, text, 'HTTP text vs gRPC text');
    return { grpc_tokens: ids.length };
  });

  // Chat, not streamed and streamed.
  const chatGreedy = {
    model,
    messages: [{ role: 'system', content: 'You are terse.' },
               { role: 'user', content: 'Name three colours.' }],
    max_tokens: 10,
    temperature: 0,
    return_token_ids: true,
  };
  let chat;
  await check('chat: non-streaming, greedy', async () => {
    chat = await client.chat.completions.create(chatGreedy);
    assert.equal(chat.object, 'chat.completion');
    assert.ok(chat.id.startsWith('chatcmpl-'), `id ${chat.id}`);
    assert.equal(chat.choices.length, 1);
    const choice = chat.choices[0];
    assert.equal(choice.message.role, 'assistant');
    assert.equal(typeof choice.message.content, 'string');
    assert.equal(choice.finish_reason, 'length');
    assert.equal(choice.token_ids.length, 10);
    checkUsage(chat.usage, 10);
    assert.equal(chat.prompt_token_ids.length, chat.usage.prompt_tokens);
    return { content: choice.message.content };
  });

  await check('chat: streamed text and token ids equal the non-streamed', async () => {
    const s = await collect(await client.chat.completions.create({ ...chatGreedy, stream: true }),
                            true);
    assert.equal(s.chunks[0].choices[0].delta.role, 'assistant', 'first chunk has no role');
    for (const c of s.chunks) assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(s.text, chat.choices[0].message.content, 'streamed content');
    assert.deepEqual(s.tokenIds, chat.choices[0].token_ids, 'streamed token_ids');
    assert.deepEqual(s.promptTokenIds, chat.prompt_token_ids, 'streamed prompt_token_ids');
    assert.equal(s.finishReason, 'length');
    return { chunks: s.chunks.length };
  });

  await check('chat: token ids equal the gRPC API\'s greedy Generate', async () => {
    const messages = await grpcGenerate(grpcRouter, {
      model,
      chat: { messages: chatGreedy.messages },
      sampling: { temperature: 0, max_tokens: 10 },
    }, args.apiKey);
    const ids = messages.flatMap((m) => m.tokens.map((t) => t.id));
    assert.deepEqual(chat.choices[0].token_ids, ids, 'HTTP token_ids vs gRPC tokens');
    assert.deepEqual(chat.prompt_token_ids, messages[0].prompt_token_ids,
                     'HTTP prompt_token_ids vs gRPC prompt_token_ids (chat template)');
  });

  // usage.prompt_tokens_details.cached_tokens after repeating a long prompt.
  await check('usage: a repeated long prompt reports cached prompt tokens', async () => {
    const long = `Cache check ${Date.now()}: ` +
        'The tandem router sends the prompt to a prefill node and the tokens back. '.repeat(16);
    const request = { model, prompt: long, max_tokens: 2, temperature: 0 };
    const first = await client.completions.create(request);
    const second = await client.completions.create(request);
    checkUsage(first.usage, 2);
    checkUsage(second.usage, 2);
    const cached = second.usage.prompt_tokens_details.cached_tokens;
    assert.ok(cached > 0, `second request: cached_tokens ${cached}, expected > 0 ` +
                          `(first: ${first.usage.prompt_tokens_details.cached_tokens})`);
    assert.ok(cached < second.usage.prompt_tokens,
              `cached_tokens ${cached} >= prompt_tokens ${second.usage.prompt_tokens}`);
    return {
      prompt_tokens: second.usage.prompt_tokens,
      cached_first: first.usage.prompt_tokens_details.cached_tokens,
      cached_second: cached,
    };
  });

  // Stop strings: the greedy text cut before the stop string's first occurrence.
  await check('completions: stop string ends the text before it, finish_reason stop', async () => {
    const full = await client.completions.create({ model, prompt: 'Once upon a time',
                                                   max_tokens: 24, temperature: 0 });
    const text = full.choices[0].text;
    const stop = pickStop(text);
    assert.ok(stop !== null, `no usable stop string in ${JSON.stringify(text)}`);
    const expected = text.slice(0, text.indexOf(stop));
    const cut = await client.completions.create({ model, prompt: 'Once upon a time',
                                                  max_tokens: 24, temperature: 0, stop: [stop] });
    assert.equal(cut.choices[0].text, expected, `text with stop ${JSON.stringify(stop)}`);
    assert.equal(cut.choices[0].finish_reason, 'stop');
    assert.ok(cut.usage.completion_tokens < 24, 'completion_tokens not below max_tokens');
    return { stop, text: expected };
  });

  await check('chat (streamed): stop string ends the content before it', async () => {
    const base = { model, messages: [{ role: 'user', content: 'Tell me a story.' }],
                   max_tokens: 24, temperature: 0 };
    const full = await client.chat.completions.create(base);
    const text = full.choices[0].message.content;
    const stop = pickStop(text);
    assert.ok(stop !== null, `no usable stop string in ${JSON.stringify(text)}`);
    const s = await collect(
        await client.chat.completions.create({ ...base, stop, stream: true }), true);
    assert.equal(s.text, text.slice(0, text.indexOf(stop)), `content with stop ${
        JSON.stringify(stop)}`);
    assert.equal(s.finishReason, 'stop');
    assert.ok(!s.text.includes(stop), 'stop string in the output');
    return { stop };
  });

  await check('max_tokens: exactly that many completion tokens, finish_reason length', async () => {
    for (const n of [1, 5]) {
      const c = await client.completions.create({ model, prompt: 'Count: one, two,', max_tokens: n,
                                                  temperature: 0, return_token_ids: true });
      assert.equal(c.choices[0].finish_reason, 'length', `max_tokens ${n}`);
      assert.equal(c.usage.completion_tokens, n, `max_tokens ${n}: completion_tokens`);
      assert.equal(c.choices[0].token_ids.length, n, `max_tokens ${n}: token_ids`);
      const s = await collect(await client.chat.completions.create({
        model, messages: [{ role: 'user', content: 'Count to ten.' }], max_tokens: n,
        temperature: 0, stream: true, stream_options: { include_usage: true },
      }), true);
      assert.equal(s.finishReason, 'length', `chat max_tokens ${n}`);
      assert.equal(s.usage.completion_tokens, n, `chat max_tokens ${n}: completion_tokens`);
    }
  });

  // Logprobs.
  await check('chat: logprobs with top_logprobs 3', async () => {
    const base = { model, messages: [{ role: 'user', content: 'Say something.' }], max_tokens: 8,
                   temperature: 0, logprobs: true, top_logprobs: 3 };
    const c = await client.chat.completions.create(base);
    const content = c.choices[0].logprobs?.content;
    assert.ok(Array.isArray(content), `logprobs.content is ${JSON.stringify(c.choices[0].logprobs)}`);
    assert.equal(content.length, c.usage.completion_tokens, 'one logprobs entry per token');
    content.forEach((entry, i) => {
      const at = `content[${i}]`;
      assert.equal(typeof entry.token, 'string', `${at}.token`);
      assert.ok(Array.isArray(entry.bytes), `${at}.bytes`);
      assert.ok(Number.isFinite(entry.logprob) && entry.logprob <= 0, `${at}.logprob ${entry.logprob}`);
      assert.equal(entry.top_logprobs.length, 3, `${at}.top_logprobs length`);
      for (let j = 1; j < 3; ++j) {
        assert.ok(entry.top_logprobs[j - 1].logprob >= entry.top_logprobs[j].logprob,
                  `${at}.top_logprobs not sorted: ${JSON.stringify(entry.top_logprobs)}`);
      }
      for (const alt of entry.top_logprobs) {
        assert.ok(typeof alt.token === 'string' && alt.logprob <= 0, `${at} alternative`);
      }
      // Greedy: the chosen token is the most likely one.
      assert.ok(Math.abs(entry.logprob - entry.top_logprobs[0].logprob) <= 1e-6,
                `${at}: chosen logprob ${entry.logprob} != top-1 ${entry.top_logprobs[0].logprob}`);
      assert.equal(entry.token, entry.top_logprobs[0].token, `${at}: chosen token != top-1`);
    });
    // The same logprobs when streamed.
    const s = await collect(await client.chat.completions.create({ ...base, stream: true }), true);
    assert.deepEqual(s.logprobs, content, 'streamed logprobs differ');
    return { tokens: content.map((e) => e.token) };
  });

  await check('completions: logprobs 2 (legacy format)', async () => {
    const c = await client.completions.create({ model, prompt: 'Numbers:', max_tokens: 6,
                                                temperature: 0, logprobs: 2 });
    const lp = c.choices[0].logprobs;
    assert.ok(lp, 'no logprobs');
    const n = c.usage.completion_tokens;
    for (const key of ['tokens', 'token_logprobs', 'top_logprobs', 'text_offset']) {
      assert.equal(lp[key]?.length, n, `logprobs.${key} length`);
    }
    for (let i = 0; i < n; ++i) {
      assert.ok(lp.token_logprobs[i] <= 0, `token_logprobs[${i}] ${lp.token_logprobs[i]}`);
      const top = lp.top_logprobs[i];
      const values = Object.values(top);
      // The chosen token and the top 2 (the chosen one is among them when greedy).
      assert.ok(values.length >= 1 && values.length <= 3, `top_logprobs[${i}] has ${values.length}`);
      assert.ok(Math.abs(Math.max(...values) - lp.token_logprobs[i]) <= 1e-6,
                `top_logprobs[${i}] best ${Math.max(...values)} != chosen ${lp.token_logprobs[i]}`);
      assert.equal(top[lp.tokens[i]], lp.token_logprobs[i], `top_logprobs[${i}] lacks the token`);
      if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1], 'text_offset decreases');
    }
    assert.equal(lp.text_offset[0], 0);
  });

  // Seeded sampling.
  await check('seed: same seed → same text; different seeds → different texts', async () => {
    const request = (seed) => client.completions.create({
      model, prompt: 'A random story:', max_tokens: 16, temperature: 0.8, seed,
    }).then((c) => c.choices[0].text);
    const a = await request(1234);
    const b = await request(1234);
    assert.equal(b, a, 'seed 1234 twice');
    const texts = new Set([a]);
    for (const seed of [1, 2, 3, 4, 5]) texts.add(await request(seed));
    assert.ok(texts.size >= 2, `6 seeds gave ${texts.size} distinct text(s)`);
    return { distinct_of_6: texts.size };
  });

  await check('stream_options.include_usage: last chunk has usage and no choices', async () => {
    for (const chatApi of [true, false]) {
      const stream = chatApi
          ? await client.chat.completions.create({
            model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0,
            stream: true, stream_options: { include_usage: true }, ignore_eos: true })
          : await client.completions.create({
            model, prompt: 'Hi', max_tokens: 4, temperature: 0, stream: true,
            stream_options: { include_usage: true }, ignore_eos: true });
      const s = await collect(stream, chatApi);
      const last = s.chunks[s.chunks.length - 1];
      assert.deepEqual(last.choices, [], `${chatApi ? 'chat' : 'completions'}: last chunk choices`);
      checkUsage(last.usage, 4);
      for (const c of s.chunks.slice(0, -1)) {
        assert.ok(c.usage === null || c.usage === undefined, 'usage before the last chunk');
      }
    }
  });

  await check('32 concurrent streams complete with the right token counts', async () => {
    const streams = [];
    for (let i = 0; i < 32; ++i) {
      const maxTokens = 4 + (i % 5);
      const chatApi = i % 2 === 0;
      const common = { model, max_tokens: maxTokens, temperature: 0, stream: true,
                       stream_options: { include_usage: true }, ignore_eos: true,
                       return_token_ids: true };
      const p = (chatApi
          ? client.chat.completions.create({
            ...common, messages: [{ role: 'user', content: `Request ${i}: say hello.` }] })
          : client.completions.create({ ...common, prompt: `Request ${i}: hello` }))
          .then((stream) => collect(stream, chatApi))
          .then((s) => {
            assert.equal(s.finishReason, 'length', `stream ${i}: finish_reason`);
            assert.equal(s.tokenIds.length, maxTokens, `stream ${i}: token ids streamed`);
            assert.equal(s.usage?.completion_tokens, maxTokens, `stream ${i}: usage`);
            return s.tokenIds.length;
          });
      streams.push(p);
    }
    const counts = await Promise.all(streams);
    return { tokens: counts.reduce((a, b) => a + b, 0) };
  });

  // Errors: the SDK's classes with OpenAI's error body.
  await check('errors: 400 BadRequestError (temperature -1, n 2, streamed too)', async () => {
    let e = await expectError(OpenAI.BadRequestError, 400, () => client.completions.create({
      model, prompt: 'x', temperature: -1 }));
    assert.equal(e.param, 'temperature', 'param of temperature -1');
    assert.equal(e.type, 'invalid_request_error');
    e = await expectError(OpenAI.BadRequestError, 400, () => client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'x' }], n: 2 }));
    assert.equal(e.param, 'n', 'param of n 2');
    // A streamed request that fails validation is a plain JSON error, not an event stream.
    await expectError(OpenAI.BadRequestError, 400, () => client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'x' }], temperature: -1, stream: true }));
    await expectError(OpenAI.BadRequestError, 400, () => client.completions.create({
      model, prompt: 'x', max_tokens: 4, unknown_field: 1 }));
  });

  await check('errors: 401 AuthenticationError (wrong key)', async () => {
    const wrong = new OpenAI({ apiKey: `${args.apiKey}-wrong`, baseURL, maxRetries: 0 });
    await expectError(OpenAI.AuthenticationError, 401, () => wrong.models.list());
    await expectError(OpenAI.AuthenticationError, 401, () => wrong.completions.create({
      model, prompt: 'x', max_tokens: 2 }));
  });

  await check('errors: gRPC Generate without the key, or with a wrong one, is UNAUTHENTICATED',
              async () => {
    const request = { model, text: 'x', sampling: { max_tokens: 2 } };
    for (const key of [undefined, `${args.apiKey}-wrong`]) {
      await assert.rejects(grpcGenerate(grpcRouter, request, key),
                           (e) => e.code === grpc.status.UNAUTHENTICATED,
                           `gRPC Generate with key ${key}`);
    }
  });

  await check('errors: 404 NotFoundError (unknown model)', async () => {
    await expectError(OpenAI.NotFoundError, 404, () => client.completions.create({
      model: 'no-such-model', prompt: 'x', max_tokens: 2 }));
    await expectError(OpenAI.NotFoundError, 404, () => client.chat.completions.create({
      model: 'no-such-model', messages: [{ role: 'user', content: 'x' }], max_tokens: 2,
      stream: true }));
  });

  await check('after the errors a request still succeeds', async () => {
    const c = await client.completions.create({ ...greedy });
    assert.equal(c.choices[0].text, completion.choices[0].text);
  });

  grpcRouter.close();
  console.log(JSON.stringify({ check: 'all', ok: true }));
}

main().then(() => process.exit(0)).catch((e) => {
  console.log(JSON.stringify({ check: current, ok: false, error: e.message, stack: e.stack }));
  process.exit(1);
});
