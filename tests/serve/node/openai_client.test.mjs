// The official `openai` package against `dspark serve` on the shipped model and drafter: chat and
// completions, streamed and not, at temperature 0. The parsed text must equal `dspark generate
// --json` without a drafter (speculation is lossless, so the server's speculative output equals
// plain decoding), the stream's deltas must add up to the non-streamed text, and the speculative
// statistics must ride on the final chunk and the response. The server runs `--schedule fixed`:
// every step verifies gamma drafts (on the tiny target dspark-async mostly turns drafting off, which
// would leave speculation barely exercised), and it needs no step-cost profile to start.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

import { startServer, generate } from "./dspark.mjs";

const MAX_TOKENS = 40;
const CHAT_PROMPT = "How many legs do three cats have?";
const COMPLETION_PROMPT = "The number of students in the class";
const TEST_TIMEOUT_MS = 60_000;

let server, client, model, refChat, refCompletion;

before(async () => {
  [server, refChat, refCompletion] = await Promise.all([
    startServer(["--schedule", "fixed"]),
    generate({ prompt: CHAT_PROMPT, chat: true, maxTokens: MAX_TOKENS }),
    generate({ prompt: COMPLETION_PROMPT, maxTokens: MAX_TOKENS }),
  ]);
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "not-needed", maxRetries: 0, timeout: TEST_TIMEOUT_MS });
  model = (await client.models.list()).data[0].id;
});

after(async () => {
  await server?.stop();
});

const chatRequest = { messages: [{ role: "user", content: CHAT_PROMPT }], max_tokens: MAX_TOKENS, temperature: 0 };
const completionRequest = { prompt: COMPLETION_PROMPT, max_tokens: MAX_TOKENS, temperature: 0 };

// llama.cpp's timings and vLLM's per-request speculative metrics, as server_api.md specifies them.
function assertSpeculativeStats(body, completionTokens, where) {
  const t = body.timings;
  assert.ok(t, `${where}: no timings`);
  for (const key of ["prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms", "predicted_per_second",
                     "draft_n", "draft_n_accepted"]) {
    assert.equal(typeof t[key], "number", `${where}: timings.${key} is ${JSON.stringify(t[key])}`);
  }
  assert.equal(t.predicted_n, completionTokens, `${where}: timings.predicted_n`);
  assert.ok(t.draft_n > 0, `${where}: nothing was drafted`);
  assert.ok(t.draft_n_accepted <= t.draft_n, `${where}: more drafts accepted than drafted`);
  const spec = body.metrics?.speculative_decoding;
  assert.ok(spec, `${where}: no metrics.speculative_decoding`);
  for (const key of ["mean_acceptance_length", "draft_acceptance_rate", "num_spec_steps", "num_drafts",
                     "num_draft_tokens", "num_accepted_draft_tokens"]) {
    assert.equal(typeof spec[key], "number", `${where}: metrics.speculative_decoding.${key}`);
  }
  const perPosition = spec.acceptance_per_position;
  assert.ok(Array.isArray(perPosition) && perPosition.length > 0, `${where}: acceptance_per_position ${perPosition}`);
  assert.ok(perPosition.every((a) => a >= 0 && a <= 1), `${where}: acceptance_per_position ${perPosition}`);
  assert.ok(Math.abs(spec.mean_acceptance_length - (1 + spec.num_accepted_draft_tokens / spec.num_drafts)) < 1e-9,
            `${where}: mean_acceptance_length ${spec.mean_acceptance_length} is not 1 + accepted / drafts`);
  assert.equal(spec.num_draft_tokens, t.draft_n, `${where}: num_draft_tokens != timings.draft_n`);
  assert.equal(spec.num_accepted_draft_tokens, t.draft_n_accepted, `${where}: accepted != timings.draft_n_accepted`);
}

function assertUsage(usage, ref, where) {
  assert.ok(usage, `${where}: no usage`);
  assert.equal(usage.prompt_tokens, ref.stats.prompt_tokens, `${where}: usage.prompt_tokens`);
  assert.equal(usage.completion_tokens, ref.ids.length, `${where}: usage.completion_tokens`);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, `${where}: usage.total_tokens`);
}

// Streams a request to the end; returns the concatenated text, the finish chunk and the usage chunk.
async function collectStream(stream, textOf) {
  const ids = new Set();
  let text = "", finish = null, usage = null, first = null, chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    first ??= chunk;
    ids.add(chunk.id);
    if (chunk.usage) usage = chunk;
    for (const choice of chunk.choices) {
      text += textOf(choice) ?? "";
      if (choice.finish_reason) {
        assert.equal(finish, null, "two chunks carry a finish_reason");
        finish = chunk;
      }
    }
  }
  assert.equal(ids.size, 1, `chunk ids differ: ${[...ids]}`);
  return { text, finish, usage, first, chunks };
}

test("chat, not streamed, equals generate --chat", { timeout: TEST_TIMEOUT_MS }, async () => {
  const res = await client.chat.completions.create({ model, ...chatRequest });
  assert.equal(res.object, "chat.completion");
  assert.equal(res.choices.length, 1);
  const [choice] = res.choices;
  assert.equal(choice.message.role, "assistant");
  assert.equal(choice.message.content, refChat.text);
  assert.ok(["stop", "length"].includes(choice.finish_reason), `finish_reason ${choice.finish_reason}`);
  assert.equal(choice.finish_reason, refChat.finish_reason);
  assertUsage(res.usage, refChat, "chat");
  assertSpeculativeStats(res, refChat.ids.length, "chat");
});

test("chat, streamed, deltas equal the non-streamed text", { timeout: TEST_TIMEOUT_MS }, async () => {
  const stream = await client.chat.completions.create({
    model, ...chatRequest, stream: true, stream_options: { include_usage: true } });
  const { text, finish, usage, first, chunks } = await collectStream(stream, (choice) => choice.delta?.content);
  assert.ok(chunks >= 3, `only ${chunks} chunks`);
  assert.equal(first.choices[0].delta.role, "assistant", "the first delta does not name the role");
  assert.equal(text, refChat.text);
  assert.ok(finish, "no chunk with a finish_reason");
  assert.equal(finish.object, "chat.completion.chunk");
  assert.equal(finish.choices[0].finish_reason, refChat.finish_reason);
  assertSpeculativeStats(finish, refChat.ids.length, "chat stream's finish chunk");
  assert.ok(usage, "include_usage: no usage chunk");
  assert.deepEqual(usage.choices, [], "the usage chunk has choices");
  assertUsage(usage.usage, refChat, "chat stream");
});

test("completion, not streamed, equals generate", { timeout: TEST_TIMEOUT_MS }, async () => {
  const res = await client.completions.create({ model, ...completionRequest });
  assert.equal(res.object, "text_completion");
  assert.equal(res.choices.length, 1);
  assert.equal(res.choices[0].text, refCompletion.text);
  assert.ok(["stop", "length"].includes(res.choices[0].finish_reason));
  assert.equal(res.choices[0].finish_reason, refCompletion.finish_reason);
  assertUsage(res.usage, refCompletion, "completion");
  assertSpeculativeStats(res, refCompletion.ids.length, "completion");
});

test("completion, streamed, deltas equal the non-streamed text", { timeout: TEST_TIMEOUT_MS }, async () => {
  const stream = await client.completions.create({
    model, ...completionRequest, stream: true, stream_options: { include_usage: true } });
  const { text, finish, usage } = await collectStream(stream, (choice) => choice.text);
  assert.equal(text, refCompletion.text);
  assert.ok(finish, "no chunk with a finish_reason");
  assert.equal(finish.choices[0].finish_reason, refCompletion.finish_reason);
  assertSpeculativeStats(finish, refCompletion.ids.length, "completion stream's finish chunk");
  assert.ok(usage, "include_usage: no usage chunk");
  assertUsage(usage.usage, refCompletion, "completion stream");
});

test("max_tokens beyond the context is a BadRequestError (400)", { timeout: TEST_TIMEOUT_MS }, async () => {
  const tooMany = 5000;  // the shipped model's context is 4096 tokens
  await assert.rejects(
    client.chat.completions.create({ model, ...chatRequest, max_tokens: tooMany }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `${err.constructor.name}: ${err.message}`);
      assert.equal(err.status, 400);
      assert.match(err.message, new RegExp(String(tooMany)), "the message does not state max_tokens");
      return true;
    });
  // The server goes on serving after a refused request.
  const res = await client.chat.completions.create({ model, ...chatRequest, max_tokens: 4 });
  assert.equal(res.choices.length, 1);
});
