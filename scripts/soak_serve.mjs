// The serving soak benchmark (not in CI): mixed load on a running `dspark serve` for a while, its
// resident memory sampled from /proc, and every failure counted.
//
//   node scripts/soak_serve.mjs --url http://127.0.0.1:8080 --pid PID [--minutes 10] [--clients 24]
//
// Mixed load: chat and completions, streamed and not, greedy and sampled, short and long outputs,
// n = 1 or 2, stop strings, speculation on and off, and one request in ten abandoned mid-stream.
// Memory: RSS after a one-minute warm-up against the largest RSS seen later; the run passes when
// it grew by less than 5% and no request failed. Prints a JSON summary on stdout.
import { readFileSync } from "node:fs";

function flag(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
}
const url = flag("url", "http://127.0.0.1:8080");
const pid = flag("pid");
const minutes = Number(flag("minutes", "10"));
const clients = Number(flag("clients", "24"));
if (!pid) throw new Error("--pid of the server is required (its memory is sampled from /proc)");

const rssKiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]);

// A deterministic generator, so two soaks send the same mix.
let state = 12345;
const random = () => ((state = (state * 1103515245 + 12345) % 2147483648) / 2147483648);
const pick = (xs) => xs[Math.floor(random() * xs.length)];
const topics = ["the sea", "a fox", "winter", "robots", "bread", "the moon", "maps", "rain", "music", "trains"];

function randomRequest() {
  const chat = random() < 0.7;
  const body = {
    max_tokens: pick([8, 32, 64, 128, 256]),
    temperature: pick([0, 0.7, 1.0]),
    seed: Math.floor(random() * 1e6),
    n: random() < 0.1 ? 2 : 1,
    stream: random() < 0.6,
  };
  if (random() < 0.2) body.stop = ["\n\n"];
  if (random() < 0.2) body.speculative = false;
  if (chat) body.messages = [{ role: "user", content: `Tell me about ${pick(topics)}.` }];
  else body.prompt = `A short story about ${pick(topics)}:`;
  return { path: chat ? "/v1/chat/completions" : "/v1/completions", body, abandon: body.stream && random() < 0.1 };
}

const counts = { ok: 0, abandoned: 0, failed: 0, tokens: 0 };
const failures = [];

async function send({ path, body, abandon }) {
  const controller = new AbortController();
  const res = await fetch(url + path, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body), signal: controller.signal,
  });
  if (res.status !== 200) throw new Error(`${res.status} ${await res.text()}`);
  if (!body.stream) {
    counts.tokens += (await res.json()).usage.completion_tokens;
    return;
  }
  const reader = res.body.getReader();
  let text = "", events = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
    events = text.split("\n\n").length - 1;
    if (abandon && events >= 3) {
      controller.abort();
      counts.abandoned++;
      return "abandoned";
    }
  }
  if (!text.includes("data: [DONE]")) throw new Error(`stream ended without [DONE]: ${text.slice(-200)}`);
}

const start = Date.now();
const end = start + minutes * 60_000;
let baseline = null, peak = 0;
const samples = [];
const sampler = setInterval(() => {
  const rss = rssKiB();
  samples.push({ t: (Date.now() - start) / 1000, rss_kib: rss });
  if (Date.now() - start >= 60_000) {
    baseline ??= rss;
    peak = Math.max(peak, rss);
  }
}, 5000);

async function client() {
  while (Date.now() < end) {
    try {
      if ((await send(randomRequest())) !== "abandoned") counts.ok++;
    } catch (e) {
      if (e.name === "AbortError") continue;
      counts.failed++;
      if (failures.length < 10) failures.push(String(e.message ?? e));
    }
  }
}
await Promise.all(Array.from({ length: clients }, client));
clearInterval(sampler);
baseline ??= rssKiB();
peak = Math.max(peak, rssKiB());
const growth = (peak - baseline) / baseline;
const summary = {
  minutes, clients, ...counts, failures, rss_baseline_kib: baseline, rss_peak_kib: peak,
  rss_growth: growth, pass: growth < 0.05 && counts.failed === 0, samples,
};
console.log(JSON.stringify(summary, null, 2));
process.exit(summary.pass ? 0 : 1);
