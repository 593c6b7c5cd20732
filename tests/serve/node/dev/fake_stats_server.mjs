// DEV FIXTURE ONLY, not used by the tests: serves src/serve/dashboard.html at / and synthetic
// GET /stats JSON (the schema of docs/serving.md), to work on the page without a built server.
//   node tests/serve/node/dev/fake_stats_server.mjs [--port 8099]
// GET /dev/down toggles /stats between 200 and 503, to see the page's disconnected state.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const htmlPath = path.resolve(here, "../../../../src/serve/dashboard.html");
const portArg = process.argv.indexOf("--port");
const port = portArg > 0 ? Number(process.argv[portArg + 1]) : 8099;
const gamma = 7, started = Date.now();
let down = false;

// A load that ramps up and down over two minutes; one sample per second, the last 300.
function sample(t) {
  const running = Math.max(0, Math.round(32 + 30 * Math.sin(t / 20)));
  const waiting = Math.max(0, Math.round(10 * Math.sin(t / 20) - 3));
  const budget = running ? 4.5 / (1 + running / 12) : 0;
  return { t, running, waiting, tokens_per_s: running * (95 - running), user_tokens_per_s: running ? 95 - running : 0,
           budget_per_step: budget, draft_share: running ? 0.15 + 0.2 * budget / 4.5 : 0,
           acceptance_length: running ? 1 + budget * 0.55 : 0, requests_per_s: running / 4 };
}

function stats() {
  const uptime = (Date.now() - started) / 1000 + 40;
  const series = [];
  for (let t = Math.max(1, Math.floor(uptime) - 299); t <= Math.floor(uptime); t++) series.push(sample(t));
  const now = sample(Math.floor(uptime));
  const requests = Math.floor(uptime * 7);
  const drafts = requests * 40, accPerPos = [];
  for (let j = 0; j < gamma; j++) accPerPos.push(Math.pow(0.78, j + 1));
  const recent = [];
  for (let i = 0; i < 20; i++) {
    const rate = 0.3 + 0.5 * Math.abs(Math.sin(requests - i));
    recent.push({ id: `chatcmpl-${(requests - i).toString(16).padStart(12, "0")}`, finished_s: uptime - i * 0.15,
                  prompt_tokens: 20 + ((requests - i) % 40), completion_tokens: 64, finish_reason: i % 5 ? "length" : "stop",
                  acceptance_length: 1 + rate * 3, acceptance_rate: rate, tokens_per_s: 60 + 40 * rate, ttft_ms: 8 + (i % 7) });
  }
  return {
    model: "tiny-target-8l", drafter: "tiny-target-8l-dspark", schedule: "dspark-async", gamma, max_concurrency: 64,
    uptime_s: uptime,
    now: { running: now.running, waiting: now.waiting, kv_usage: now.running / 80, budget_per_step: now.budget_per_step,
           draft_share: now.draft_share, sps_estimate: 410.0, capacity_k: Math.round(now.budget_per_step * now.running) },
    totals: { requests, prompt_tokens: requests * 30, generation_tokens: requests * 64, num_drafts: drafts,
              num_draft_tokens: drafts * gamma, num_accepted_tokens: Math.round(drafts * accPerPos.reduce((a, b) => a + b)),
              accepted_per_pos: accPerPos.map((a) => Math.round(a * drafts)), acceptance_per_pos: accPerPos },
    series, recent,
  };
}

http.createServer((req, res) => {
  if (req.url === "/") {
    res.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    return res.end(fs.readFileSync(htmlPath));
  }
  if (req.url === "/stats") {
    if (down) { res.writeHead(503, { "Content-Type": "application/json" }); return res.end('{"error":{}}'); }
    res.writeHead(200, { "Content-Type": "application/json" });
    return res.end(JSON.stringify(stats()));
  }
  if (req.url === "/dev/down") { down = !down; res.writeHead(200); return res.end(down ? "down\n" : "up\n"); }
  res.writeHead(404); res.end();
}).listen(port, "127.0.0.1", () => console.log(`fake stats server: http://127.0.0.1:${port}/`));
