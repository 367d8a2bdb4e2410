"""Issue 9: scheduled DSpark against plain on the server at 1-16 users, interleaved level by level
and round by round (a VM slow spell hits every arm alike), with each server's /metrics deltas
(verify rounds, drafted and accepted tokens) so a gap can be read as drafting cost or as gating.

Usage: python docs/results/session9/multi_user.py OUT.json plain=URL dspark=URL [...]
(servers started beforehand, see multi_user.sh). ROUNDS, LEVELS, TOKENS via the environment;
REQS (requests per user and level, default 2), ORDER=abba (reverse the arms every other round, so
neither always runs first), and an arm as name=URL@MODEL (one server serving several methods:
session17/shared_server.sh, which takes the difference between server processes out)."""

import json
import os
import re
import statistics
import sys

import httpx

from draftsmith.serving.loadtest import load_prompts, run_loadtest

ROUNDS = int(os.environ.get("ROUNDS", 2))
LEVELS = [int(c) for c in os.environ.get("LEVELS", "1,2,4,8,16").split(",")]
TOKENS = int(os.environ.get("TOKENS", 64))
REQS = int(os.environ.get("REQS", 2))
ABBA = os.environ.get("ORDER", "") == "abba"
out_path, servers = sys.argv[1], dict(arg.split("=", 1) for arg in sys.argv[2:])
models = {arm: (url.split("@", 1) + [None])[1] for arm, url in servers.items()}
servers = {arm: url.split("@", 1)[0] for arm, url in servers.items()}


def counters(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    sums: dict[str, float] = {}
    names = ("verify_rounds", "drafted_tokens", "accepted_tokens", "completion_tokens")
    for name in (f"{n}_total" for n in names):
        for m in re.finditer(rf"^draftsmith_{name}(?:{{[^}}]*}})? ([\d.e+]+)$", text, re.M):
            sums[name] = sums.get(name, 0.0) + float(m[1])
    return sums


rows = []
for r in range(ROUNDS):
    for c in LEVELS:
        prompts = load_prompts("mtbench,humaneval,gsm,alpaca", REQS * c)
        arms = list(servers.items())
        for arm, url in arms[::-1] if ABBA and r % 2 else arms:
            before = counters(url)
            report = run_loadtest(
                url, prompts, [c], REQS * c, TOKENS, 900, model=models[arm], log=lambda m: None
            )
            after = counters(url)
            delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
            level = report["levels"][0]
            row = {
                "round": r,
                "users": c,
                "arm": arm,
                "total_tok_s": level["total_tok_s"],
                "per_user_p50": level["per_user_tok_s_p50"],
                "errors": level["errors"],
                "drafted_per_round": delta["drafted_tokens_total"] / max(delta["verify_rounds_total"], 1),
                "tau": delta["completion_tokens_total"] / max(delta["verify_rounds_total"], 1),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
print()
print(
    "| users | arm | total tok/s (median) | per-user p50 | vs plain | per-round ratio, median (min-max) "
    "| per-user vs plain | drafted/round | tokens/round |"
)
print("|---|---|---|---|---|---|---|---|---|")
for c in LEVELS:
    base = statistics.median(x["total_tok_s"] for x in rows if x["users"] == c and x["arm"] == "plain")
    for arm in servers:
        mine = [x for x in rows if x["users"] == c and x["arm"] == arm]
        tot = statistics.median(x["total_tok_s"] for x in mine)
        pu = statistics.median(x["per_user_p50"] for x in mine)
        dr = statistics.median(x["drafted_per_round"] for x in mine)
        tau = statistics.median(x["tau"] for x in mine)
        plain = {x["round"]: x for x in rows if x["users"] == c and x["arm"] == "plain"}
        ratios = [x["total_tok_s"] / plain[x["round"]]["total_tok_s"] for x in mine]
        per_user = statistics.median(x["per_user_p50"] / plain[x["round"]]["per_user_p50"] for x in mine)
        spread = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        print(
            f"| {c} | {arm} | {tot:.1f} | {pu:.1f} | {tot / base:.2f} | {spread} | {per_user:.2f} "
            f"| {dr:.2f} | {tau:.2f} |"
        )
json.dump({"rows": rows}, open(out_path, "w"), indent=1)
