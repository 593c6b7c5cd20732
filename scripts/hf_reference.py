#!/usr/bin/env python3
"""Hugging Face transformers as the reference for scripts/device_check.sh, and its small helpers.

  ids       --model DIR --n N                 N fixed token ids below the model's vocab, comma-separated
  logits    --model DIR --ids IDS --dtype D --out FILE
                                              transformers' logits of every position (f32, row-major
                                              [n_tokens, vocab]), eager attention, on the GPU if any
  compare   --a FILE --b FILE --model DIR --tolerance T --label L --out JSON
                                              max |a - b| and argmax agreement of two logits files;
                                              exit 1 when max |a - b| > T
  same-ids  --a JSONL --b JSONL --label L --out JSON
                                              whether two `dspark generate --json` outputs hold the
                                              same token ids; exit 1 otherwise
  decode    --model DIR --dtype D --contexts C... --tokens N --out JSON
                                              transformers' own decode (ms per token) and T(8)/T(1)
                                              after C cached positions, timed with the GPU synchronized
  summary   --stages JSONL --results DIR --out JSON
                                              the device check's summary: stages and figures (and
                                              the [mc] lines of logs/monte_carlo.log beside JSONL)
Only the Python standard library is needed for ids, compare, same-ids and summary.
"""
import argparse
import array
import json
import math
import os
import statistics
import sys
import time


def vocab_size(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return int(json.load(f)["vocab_size"])


def cmd_ids(a):
    vocab = vocab_size(a.model)
    print(",".join(str((7 * i + 3) % vocab) for i in range(a.n)))


def load_model(model_dir, dtype_name):
    import torch
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, dtype_name)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager")
    except TypeError:  # transformers before 4.56 calls it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=dtype, attn_implementation="eager")
    return model.to(device).eval(), device


def cmd_logits(a):
    import torch

    model, device = load_model(a.model, a.dtype)
    ids = torch.tensor([[int(x) for x in a.ids.split(",")]], device=device)
    with torch.no_grad():
        logits = model(ids).logits[0].float().cpu().contiguous()
    with open(a.out, "wb") as f:
        f.write(logits.numpy().astype("<f4").tobytes())


def read_f32(path):
    values = array.array("f")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    return values


def cmd_compare(a):
    vocab = vocab_size(a.model)
    x, y = read_f32(a.a), read_f32(a.b)
    result = {"label": a.label, "tolerance": a.tolerance, "a": a.a, "b": a.b}
    if len(x) != len(y) or len(x) % vocab:
        result.update(ok=False, error=f"sizes differ or are not rows of {vocab}: {len(x)} vs {len(y)}")
    else:
        n_rows = len(x) // vocab
        max_diff, max_abs, same_argmax = 0.0, 0.0, 0
        for r in range(n_rows):
            rx, ry = x[r * vocab:(r + 1) * vocab], y[r * vocab:(r + 1) * vocab]
            max_diff = max(max_diff, max(abs(p - q) for p, q in zip(rx, ry)))
            max_abs = max(max_abs, max(abs(p) for p in ry))
            same_argmax += max(range(vocab), key=rx.__getitem__) == max(range(vocab), key=ry.__getitem__)
        finite = all(math.isfinite(v) for v in x)
        result.update(rows=n_rows, max_abs_diff=max_diff, max_abs_logit=max_abs, same_argmax_rows=same_argmax,
                      finite=finite, ok=finite and max_diff <= a.tolerance)
    write_json(a.out, result)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def generated_ids(text):
    return [json.loads(line)["ids"] for line in text.splitlines() if line.strip()]


def cmd_same_ids(a):
    x, y = generated_ids(a.a), generated_ids(a.b)
    result = {"label": a.label, "ok": x == y and len(x) > 0, "tokens": sum(len(s) for s in x)}
    if not result["ok"]:
        result.update(a=x, b=y)
    write_json(a.out, result)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


def cmd_decode(a):
    import torch

    model, device = load_model(a.model, a.dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    gen = torch.Generator().manual_seed(1)
    vocab = model.config.vocab_size
    points = []

    def timed(fn):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - t0) * 1e3

    with torch.no_grad():
        for context in a.contexts:
            prompt = torch.randint(0, vocab, (1, context), generator=gen).to(device)
            out = model(prompt, use_cache=True)
            cache = out.past_key_values
            token = out.logits[:, -1:].argmax(-1)
            step_ms = []
            for _ in range(a.tokens):  # greedy decode, one token a step
                def step():
                    nonlocal out, token
                    out = model(token, past_key_values=cache, use_cache=True)
                    token = out.logits[:, -1:].argmax(-1)
                step_ms.append(timed(step))
            cache.crop(context)
            t = {}
            for n_new in (1, 8):  # a verify of n_new tokens, rolled back after each run
                new = torch.randint(0, vocab, (1, n_new), generator=gen).to(device)
                runs = []
                for _ in range(a.runs + 1):
                    runs.append(timed(lambda: model(new, past_key_values=cache, use_cache=True)))
                    cache.crop(context)
                t[n_new] = statistics.median(runs[1:])
            decode_ms = statistics.median(step_ms[2:])
            points.append({"context": context, "decode_ms": decode_ms, "decode_tokens_per_s": 1e3 / decode_ms,
                           "t1_ms": t[1], "t8_ms": t[8], "t8_over_t1": t[8] / t[1]})
            print(json.dumps(points[-1]))
    result = {"implementation": "transformers eager, DynamicCache, batch 1", "dtype": a.dtype, "device":
              torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "points": points}
    write_json(a.out, result)
    return 0


def cmd_summary(a):
    stages = []
    with open(a.stages) as f:
        stages = [json.loads(line) for line in f if line.strip()]
    results = {}
    for name in sorted(os.listdir(a.results)) if os.path.isdir(a.results) else []:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(a.results, name)) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            results[name] = {"error": str(e)}
            continue
        if name.startswith("gtest_") or name.startswith("mc_"):  # gtest's report: counts and failures
            failed = [f"{s['name']}.{t['name']}" for s in data.get("testsuites", []) for t in s.get("testsuite", [])
                      if t.get("failures")]
            data = {"tests": data.get("tests"), "failures": data.get("failures"), "skipped": data.get("disabled"),
                    "failed": failed, "seconds": data.get("time")}
        results[name] = data
    mc_log = os.path.join(os.path.dirname(a.stages), "logs", "monte_carlo.log")
    if os.path.exists(mc_log):  # the Monte Carlo cases' statistics, as the test prints them
        with open(mc_log, errors="replace") as f:
            results["monte_carlo_lines"] = [line.strip() for line in f if line.startswith("[mc]")]
    summary = {"ok": all(s["status"] == "ok" for s in stages), "stages": stages, "results": results}
    write_json(a.out, summary)
    return 0


def write_json(path, value):
    with open(path, "w") as f:
        json.dump(value, f, indent=1)
        f.write("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("ids"); s.add_argument("--model", required=True); s.add_argument("--n", type=int, default=64)
    s = sub.add_parser("logits")
    for flag in ("--model", "--ids", "--out"):
        s.add_argument(flag, required=True)
    s.add_argument("--dtype", default="float32")
    s = sub.add_parser("compare")
    for flag in ("--a", "--b", "--model", "--label", "--out"):
        s.add_argument(flag, required=True)
    s.add_argument("--tolerance", type=float, required=True)
    s = sub.add_parser("same-ids")
    for flag in ("--a", "--b", "--label", "--out"):
        s.add_argument(flag, required=True)
    s = sub.add_parser("decode")
    s.add_argument("--model", required=True); s.add_argument("--out", required=True)
    s.add_argument("--dtype", default="bfloat16"); s.add_argument("--contexts", type=int, nargs="+", default=[256, 1024])
    s.add_argument("--tokens", type=int, default=64); s.add_argument("--runs", type=int, default=7)
    s = sub.add_parser("summary")
    for flag in ("--stages", "--results", "--out"):
        s.add_argument(flag, required=True)
    a = p.parse_args()
    try:
        return {"ids": cmd_ids, "logits": cmd_logits, "compare": cmd_compare, "same-ids": cmd_same_ids,
                "decode": cmd_decode, "summary": cmd_summary}[a.command](a) or 0
    except (ImportError, OSError, ValueError, KeyError) as e:
        print(f"hf_reference {a.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
