// What the Node tests share: starting `dspark serve` on a free loopback port and stopping it
// (always, also when a test fails or the runner is interrupted), and `dspark generate --json` as the
// reference output. The binary comes from $DSPARK_BINARY, the repository from $DSPARK_SOURCE_DIR
// (ctest sets both; see CMakeLists.txt).
import { spawn, execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";

export const binary = process.env.DSPARK_BINARY;
export const sourceDir = process.env.DSPARK_SOURCE_DIR;
if (!binary || !sourceDir) throw new Error("set DSPARK_BINARY and DSPARK_SOURCE_DIR (ctest does)");
// The shipped tiny model: the suite's servers answer many requests, and the default target is 8x larger.
export const modelDir = path.join(sourceDir, "models", "tiny-target-8l");

const STARTUP_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 5_000;
const running = new Set();  // servers not yet stopped, killed if this process is torn down

function killAll() {
  for (const child of running) child.kill("SIGKILL");
}
process.on("exit", killAll);
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.on(signal, () => {
    killAll();
    process.exit(128 + (signal === "SIGINT" ? 2 : 15));
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The promise's outcome, or an error naming `what` after `ms`; the timer never outlives it.
async function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// Resolves with the base URL once the server printed its listening line; rejects if it exits first.
function waitForListening(child, output) {
  return new Promise((resolve, reject) => {
    let stdout = "";
    child.stdout.on("data", (data) => {
      stdout += data;
      output.push(String(data));
      const match = /listening on (http:\/\/[^\s]+)/.exec(stdout);
      if (match) resolve(match[1].replace(/\/$/, ""));
    });
    child.stderr.on("data", (data) => output.push(String(data)));
    child.on("exit", (code, signal) =>
      reject(new Error(`dspark serve exited (${signal ?? code}) before listening:\n${output.join("")}`)));
  });
}

async function waitForHealth(url, deadline) {
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${url}/health`);
      if (res.status === 200) return;
    } catch {
      // not accepting connections yet
    }
    await sleep(100);
  }
  throw new Error(`${url}/health did not answer 200 within ${STARTUP_TIMEOUT_MS} ms`);
}

// Starts `dspark serve --port 0` on the tiny model (with its shipped drafter) and waits
// for GET /health to answer 200. Returns {url, output(), stop()}.
export async function startServer(extraArgs = []) {
  const args = ["serve", "--model", modelDir, "--host", "127.0.0.1", "--port", "0", ...extraArgs];
  // Sleeping OpenMP workers, as in server_process.h: the suite runs two test processes at once,
  // and these tests time the server's protocol, not its speed.
  const env = { OMP_WAIT_POLICY: "passive", ...process.env };
  const child = spawn(binary, args, { cwd: sourceDir, env, stdio: ["ignore", "pipe", "pipe"] });
  running.add(child);
  const output = [];
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const stop = async () => {
    if (!running.delete(child)) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), STOP_GRACE_MS);
    await exited;
    clearTimeout(timer);
  };
  try {
    const deadline = Date.now() + STARTUP_TIMEOUT_MS;
    const url = await withTimeout(waitForListening(child, output), STARTUP_TIMEOUT_MS, "no listening line");
    await waitForHealth(url, deadline);
    return { url, stop, output: () => output.join("") };
  } catch (err) {
    await stop();
    throw err;
  }
}

// `dspark generate --json` at temperature 0 on the tiny model: {text, ids, finish_reason, stats}.
export async function generate({ prompt, chat = false, maxTokens }) {
  const args = ["generate", "--model", modelDir, "--prompt", prompt, "--max-tokens", String(maxTokens),
                "--temperature", "0", "--json", ...(chat ? ["--chat"] : [])];
  const { stdout } = await promisify(execFile)(binary, args, { cwd: sourceDir, maxBuffer: 16 << 20 });
  return JSON.parse(stdout);
}

// Reads an OpenAI-style SSE response body to the end; returns the parsed `data:` events ([DONE] last).
export async function readEvents(res) {
  const events = [];
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of res.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;  // SSE comments (keep-alives)
        const data = line.slice(6);
        events.push(data === "[DONE]" ? "[DONE]" : JSON.parse(data));
      }
    }
  }
  return events;
}
