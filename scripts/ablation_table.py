#!/usr/bin/env python3
"""One Markdown table of the DSpark ablations (scripts/ablate_dspark.sh): for each variant and
evaluation gamma, tau from bench accept (macro over the prompt files) and single-request tokens/s
and speedup over autoregressive from bench speedup (all files pooled), beside each drafter's
teacher-forced validation tau from its training summary. Also writes ablation.json.
Usage: scripts/ablation_table.py RESULTS_DIR [RUNS_DIR]   (RUNS_DIR defaults to runs/ablate)"""
import json
import os
import sys

out = sys.argv[1]
runs = sys.argv[2] if len(sys.argv) > 2 else "runs/ablate"


def load(name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)


def variant(label):  # "runs/ablate/rank32/model" is labelled "rank32/dspark"
    return label.split("/")[0]


rows = {}  # (variant, gamma) -> dict


def row(v, gamma):
    return rows.setdefault((v, gamma), {"variant": v, "gamma": gamma})


def add_accept(report, gamma):
    for label, tau in report["macro_acceptance_length"].items():
        row(variant(label), gamma)["tau"] = tau


def add_speedup(report, gamma_of):
    for c in report["cells"]:
        if c["file"] != "all" or c["method"] == report["baseline"]:
            continue
        r = row(variant(c["method"]), gamma_of(c["method"]))
        r["tokens_per_second"] = c["tokens_per_second"]
        r["speedup"] = c["speedup"]
        r["speedup_interval"] = [c["speedup_low"], c["speedup_high"]]
        r["tau_greedy"] = c["acceptance_length"]


add_accept(load("ablation-accept.json"), 7)
for g in (4, 8, 16):
    add_accept(load(f"ablation-accept-block16-g{g}.json"), g)
add_speedup(load("ablation-speedup.json"), lambda m: 16 if variant(m) == "block16" else 7)
for g in (4, 8):
    add_speedup(load(f"ablation-speedup-block16-g{g}.json"), lambda m, g=g: g)
# block16 at gamma 7 came from the shared accept run only: keep the gammas it was trained for.
rows.pop(("block16", 7), None)

for (v, gamma), r in rows.items():
    summary = os.path.join(runs, v, "model", "training_summary.json")
    if os.path.exists(summary):
        with open(summary) as f:
            r["valid_tau"] = json.load(f)["valid_tau"]

order = ["baseline", "rnn", "rank32", "rank128", "rank256", "layers1", "layers4", "block16"]
rows = dict(sorted(rows.items(), key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order else len(order), kv[0][1])))

print("| variant | gamma | valid tau (teacher-forced) | tau (T = 1) | tau (T = 0) | tokens/s (T = 0) | speedup over AR [95% interval] |")
print("|---|---|---|---|---|---|---|")
for r in rows.values():
    lo, hi = r.get("speedup_interval", [float("nan")] * 2)
    print(f"| {r['variant']} | {r['gamma']} | {r.get('valid_tau', float('nan')):.3f} | {r.get('tau', float('nan')):.3f} | {r.get('tau_greedy', float('nan')):.3f} "
          f"| {r.get('tokens_per_second', float('nan')):.1f} | {r.get('speedup', float('nan')):.2f}x [{lo:.2f}, {hi:.2f}] |")
with open(os.path.join(out, "ablation.json"), "w") as f:
    json.dump(list(rows.values()), f, indent=2)
