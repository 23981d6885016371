// An independent client of tandem's public API: @grpc/grpc-js with the .proto loaded at run time
// by @grpc/proto-loader (no generated code, no tandem code), calling
// tandem.v1.Generation/Generate on a running router.
//
//   node generate_stream.mjs HOST:PORT [--max-tokens N]
//
// Checks: (a) a greedy text prompt streams token messages whose text deltas join to a non-empty
// string, prompt_token_ids ride on the first message, the last message alone carries
// finish_reason "length" and usage (completion_tokens == max_tokens == tokens streamed), and a
// second identical request streams the same tokens; (b) a chat prompt streams and finishes;
// (c) an empty prompt and an out-of-vocabulary token id are rejected with INVALID_ARGUMENT and a
// message. Prints one line per check and "N passed, N failed"; exits 1 on any failure.
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let grpc;
let protoLoader;
try {
  grpc = await import('@grpc/grpc-js');
  protoLoader = await import('@grpc/proto-loader');
} catch (e) {
  console.error(`cannot load @grpc/grpc-js / @grpc/proto-loader (${e.message}): ` +
                'run scripts/install-deps.sh (npm install in tests/conformance)');
  process.exit(1);
}

const here = path.dirname(fileURLToPath(import.meta.url));
const protoRoot = path.resolve(here, '../../../proto');

function parseArgs(argv) {
  const args = { address: argv[0], maxTokens: 8 };
  for (let i = 1; i < argv.length; i += 2) {
    if (argv[i] === '--max-tokens') args.maxTokens = Number(argv[i + 1]);
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!args.address || !/^[^:]+:\d+$/.test(args.address)) {
    throw new Error('usage: node generate_stream.mjs HOST:PORT [--max-tokens N]');
  }
  return args;
}

function loadService() {
  const definition = protoLoader.loadSync('tandem/v1/generate.proto', {
    includeDirs: [protoRoot],
    keepCase: true,  // proto field names, as on the wire
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const proto = grpc.loadPackageDefinition(definition);
  return proto.tandem.v1.Generation;
}

// Runs one Generate call; resolves with every message, rejects with the gRPC error.
function generate(client, request, timeoutMs = 120000) {
  return new Promise((resolve, reject) => {
    const messages = [];
    const call = client.Generate(request, { deadline: Date.now() + timeoutMs });
    call.on('data', (m) => messages.push(m));
    call.on('error', reject);
    call.on('end', () => resolve(messages));
  });
}

async function expectInvalidArgument(client, request) {
  try {
    const messages = await generate(client, request);
    assert.fail(`expected INVALID_ARGUMENT, got ${messages.length} messages`);
  } catch (e) {
    if (e.code === undefined) throw e;
    assert.equal(e.code, grpc.status.INVALID_ARGUMENT,
                 `expected INVALID_ARGUMENT, got ${grpc.status[e.code] ?? e.code}: ${e.details}`);
    assert.ok(e.details && e.details.length > 0, 'INVALID_ARGUMENT without a message');
    return e.details;
  }
}

const tokenIds = (messages) => messages.flatMap((m) => m.tokens.map((t) => t.id));
const joinedText = (messages) => messages.map((m) => m.text).join('');

// Stream shape every successful Generate must have.
function checkStream(messages, { maxTokens, exactLength }) {
  assert.ok(messages.length >= 1, 'no response messages');
  assert.ok(messages.some((m) => m.tokens.length > 0), 'no message carries a token');
  assert.ok(messages[0].prompt_token_ids.length > 0, 'first message has no prompt_token_ids');
  for (const m of messages.slice(1)) {
    assert.equal(m.prompt_token_ids.length, 0, 'prompt_token_ids repeated after the first message');
  }
  for (const m of messages.slice(0, -1)) {
    assert.equal(m.finish_reason, '', `finish_reason "${m.finish_reason}" before the last message`);
  }
  const last = messages[messages.length - 1];
  assert.ok(last.usage, 'last message has no usage');
  const ids = tokenIds(messages);
  assert.equal(last.usage.completion_tokens, ids.length, 'usage.completion_tokens != tokens streamed');
  assert.equal(last.usage.prompt_tokens, messages[0].prompt_token_ids.length,
               'usage.prompt_tokens != prompt_token_ids');
  if (exactLength) {
    assert.equal(last.finish_reason, 'length');
    assert.equal(last.usage.completion_tokens, maxTokens);
  } else {
    assert.ok(['length', 'stop'].includes(last.finish_reason),
              `finish_reason "${last.finish_reason}"`);
    assert.ok(ids.length <= maxTokens, `${ids.length} tokens > max_tokens ${maxTokens}`);
  }
  for (const id of ids) assert.ok(Number.isInteger(id) && id >= 0, `bad token id ${id}`);
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const Generation = loadService();
  const client = new Generation(args.address, grpc.credentials.createInsecure());
  const results = [];
  async function check(name, fn) {
    try {
      const note = await fn();
      results.push(true);
      console.log(`ok    ${name}${note ? ` (${note})` : ''}`);
    } catch (e) {
      results.push(false);
      console.log(`FAIL  ${name}: ${e.message}`);
    }
  }

  const greedy = {
    text: 'Hello, my name is',
    sampling: { temperature: 0, max_tokens: args.maxTokens, ignore_eos: true },
  };
  let first;
  await check('text prompt, greedy: stream shape, finish_reason length, usage', async () => {
    first = await generate(client, greedy);
    checkStream(first, { maxTokens: args.maxTokens, exactLength: true });
    const text = joinedText(first);
    assert.ok(text.length > 0, 'text deltas join to an empty string');
    return `${first.length} messages, ${JSON.stringify(text)}`;
  });
  await check('text prompt, greedy: same request, same tokens', async () => {
    assert.ok(first, 'first request failed');
    const again = await generate(client, greedy);
    assert.deepEqual(tokenIds(again), tokenIds(first));
    assert.equal(joinedText(again), joinedText(first));
  });
  await check('request_id is echoed', async () => {
    const messages = await generate(client, { ...greedy, request_id: 'grpc-js-conformance-1' });
    for (const m of messages) assert.equal(m.request_id, 'grpc-js-conformance-1');
  });
  await check('chat prompt streams and finishes', async () => {
    const messages = await generate(client, {
      chat: { messages: [{ role: 'user', content: 'What is the capital of France?' }] },
      sampling: { temperature: 0, max_tokens: 6 },
    });
    checkStream(messages, { maxTokens: 6, exactLength: false });
    // The chat template wraps the message: more prompt tokens than the text alone has.
    assert.ok(messages[0].prompt_token_ids.length > 7, 'chat template not applied');
    return `${messages[0].prompt_token_ids.length} prompt tokens`;
  });
  await check('token_ids prompt streams', async () => {
    const messages = await generate(client, {
      token_ids: { ids: [791, 6864, 315, 9822, 374] },
      sampling: { temperature: 0, max_tokens: 3, ignore_eos: true },
    });
    checkStream(messages, { maxTokens: 3, exactLength: true });
    assert.deepEqual(messages[0].prompt_token_ids, [791, 6864, 315, 9822, 374]);
  });
  await check('empty prompt: INVALID_ARGUMENT with a message', async () =>
    expectInvalidArgument(client, { text: '', sampling: { max_tokens: 4 } }));
  await check('out-of-vocabulary token id: INVALID_ARGUMENT with a message', async () =>
    expectInvalidArgument(client, { token_ids: { ids: [1, 2147483647] }, sampling: { max_tokens: 4 } }));

  client.close();
  const passed = results.filter((r) => r).length;
  const failed = results.length - passed;
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
