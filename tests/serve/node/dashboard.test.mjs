// The dashboard (GET /) in a real headless Chromium (Debian's /usr/bin/chromium driven by
// puppeteer-core) while 16 streaming clients load the server: the charts fill with data, the page
// asks nothing of any host but the server, it raises no script error, and it shows "disconnected"
// when the server goes away. Saves a screenshot to $DSPARK_SCREENSHOT, else to the build directory
// ($DSPARK_BUILD_DIR) or the temporary directory, as dashboard.png. For a screenshot for the docs:
// DSPARK_DASHBOARD_LOAD_S (seconds of load before it, default 3) and DSPARK_DASHBOARD_SERVE_ARGS
// (the server's flags, default "--schedule fixed").
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import os from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";

import { startServer, readEvents } from "./dspark.mjs";

const CHROMIUM = process.env.DSPARK_CHROMIUM ?? "/usr/bin/chromium";
const CLIENTS = 16;
const LOAD_MAX_MS = 20_000;      // the charts must hold data by then
// Load kept on after that, so the charts hold a few seconds; longer for a screenshot for the docs.
const EXTRA_LOAD_MS = 1000 * Number(process.env.DSPARK_DASHBOARD_LOAD_S ?? 3);
// `fixed` verifies gamma drafts every step, so every position of the acceptance chart has data,
// and needs no step-cost profile (the dspark schedules' default one costs minutes to measure on a
// machine that has none cached).
const SERVE_ARGS = (process.env.DSPARK_DASHBOARD_SERVE_ARGS ?? "--schedule fixed").split(" ").filter(Boolean);
const TEST_TIMEOUT_MS = 60_000 + EXTRA_LOAD_MS;
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);
const PROMPTS = ["Tell me about the sea.", "What is 7 times 8?", "Write a short poem about trees.",
                 "How do birds fly?"];

let server, browser;

before(async () => {
  server = await startServer(SERVE_ARGS);
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // Chromium refuses to run as root with its sandbox; the page is our own, on loopback.
    args: [...(process.getuid?.() === 0 ? ["--no-sandbox"] : []), "--disable-gpu", "--no-first-run"],
  });
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

// One client: streamed chat requests one after another until `stop.now`; counts what finished.
async function client(i, stop, done) {
  for (let n = 0; !stop.now; n++) {
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: PROMPTS[(i + n) % PROMPTS.length] }],
                             max_tokens: 32, temperature: 0.7, seed: i * 1000 + n, stream: true }),
    });
    assert.equal(res.status, 200, `client ${i}: HTTP ${res.status}`);
    const events = await readEvents(res);
    assert.equal(events.at(-1), "[DONE]", `client ${i}: the stream did not end with [DONE]`);
    done.count += 1;
  }
}

function screenshotPath() {
  if (process.env.DSPARK_SCREENSHOT) return process.env.DSPARK_SCREENSHOT;
  return path.join(process.env.DSPARK_BUILD_DIR ?? os.tmpdir(), "dashboard.png");
}

const chartsHoldData = () => {
  const points = (id) => Number(document.getElementById(id)?.dataset.points ?? 0);
  return document.body.dataset.ready === "true" && points("chart-throughput") > 0 && points("chart-acceptance") > 0
    && points("chart-queue") > 0 && Number(document.getElementById("recent").dataset.rows) > 0;
};

test("the dashboard fills while load runs, and fetches only from the server", { timeout: TEST_TIMEOUT_MS }, async () => {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const foreign = [], pageErrors = [];
  await page.setRequestInterception(true);
  page.on("request", (req) => {
    const url = new URL(req.url());
    if (url.protocol === "data:" || LOOPBACK.has(url.hostname)) return req.continue();
    foreign.push(req.url());
    return req.abort();
  });
  page.on("pageerror", (err) => pageErrors.push(err.message));

  const stop = { now: false }, done = { count: 0 };
  const clients = Array.from({ length: CLIENTS }, (_, i) => client(i, stop, done));
  try {
    const res = await page.goto(`${server.url}/`, { waitUntil: "load" });
    assert.equal(res.status(), 200);
    assert.match(res.headers()["content-type"] ?? "", /text\/html/);
    await page.waitForFunction(chartsHoldData, { polling: 250, timeout: LOAD_MAX_MS });
    await new Promise((resolve) => setTimeout(resolve, EXTRA_LOAD_MS));
    await page.screenshot({ path: screenshotPath() });
  } finally {
    stop.now = true;
    await Promise.all(clients);
  }

  const seen = await page.evaluate(() => ({
    points: Object.fromEntries([...document.querySelectorAll("[data-points]")].map((e) => [e.id, Number(e.dataset.points)])),
    rows: Number(document.getElementById("recent").dataset.rows),
    connected: document.body.dataset.connected,
  }));
  assert.ok(done.count >= CLIENTS, `only ${done.count} requests finished`);
  assert.equal(seen.connected, "true");
  assert.ok(seen.points["chart-throughput"] >= 2, `throughput chart: ${JSON.stringify(seen.points)}`);
  assert.ok(seen.points["chart-acceptance"] > 0, `acceptance chart: ${JSON.stringify(seen.points)}`);
  assert.ok(seen.rows > 0, "the last-requests table is empty");
  assert.deepEqual(foreign, [], "the page asked hosts other than the server");
  assert.deepEqual(pageErrors, [], "the page raised script errors");

  // Without the server the page says so, and keeps what it showed.
  await server.stop();
  await page.waitForFunction(() => document.body.dataset.connected === "false", { polling: 250, timeout: 10_000 });
  assert.match(await page.$eval("#status-text", (e) => e.textContent), /disconnected/);
  assert.ok(await page.$eval("#chart-throughput", (e) => Number(e.dataset.points) > 0));
  await page.close();
});

// A server started with --api-key guards /stats too: the page says it needs the key and shows a
// form for it (it once retried a 401 every second with no way to send one); a wrong key is told
// apart, and with the right one the page connects and shows the server's requests.
test("the dashboard asks for the API key of a guarded server", { timeout: 60_000 }, async () => {
  const guarded = await startServer(["--draft", "none", "--api-key", "sekrit"]);
  const page = await browser.newPage();
  try {
    const reply = await fetch(`${guarded.url}/v1/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer sekrit" },
      body: JSON.stringify({ prompt: "Hello", max_tokens: 4 }),
    });
    assert.equal(reply.status, 200);
    await page.goto(`${guarded.url}/`, { waitUntil: "load" });
    await page.waitForFunction(() => document.body.dataset.auth === "needed", { polling: 100, timeout: 10_000 });
    assert.ok(await page.$eval("#key-form", (e) => getComputedStyle(e).display !== "none"), "no key form shown");
    assert.match(await page.$eval("#banner-reason", (e) => e.textContent), /needs the server's API key/);

    await page.type("#key-input", "wrong");
    await page.click("#key-form button");
    await page.waitForFunction(() => /refused the API key/.test(document.getElementById("banner-reason").textContent),
                               { polling: 100, timeout: 10_000 });

    await page.$eval("#key-input", (e) => { e.value = ""; });
    await page.type("#key-input", "sekrit");
    await page.click("#key-form button");
    await page.waitForFunction(() => document.body.dataset.connected === "true", { polling: 100, timeout: 10_000 });
    await page.waitForFunction(() => Number(document.getElementById("recent").dataset.rows) > 0,
                               { polling: 100, timeout: 10_000 });
    assert.equal(await page.evaluate(() => document.body.dataset.auth), "ok");
  } finally {
    await page.close();
    await guarded.stop();
  }
});
