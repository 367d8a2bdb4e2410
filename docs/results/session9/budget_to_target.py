"""Issue 8: how far DSpark is from its speed targets, and what training budget the measured curve
says would close the gap (a log-linear extrapolation, not a measurement).

1. Required tau: from bench run 8's calibrated fp32 step table (calibrate-before.md) and its
   measured DSpark drafting time and per-round engine overhead (plan-vs-measured.md), the tokens a
   round of k drafts must yield for speedup S is S * (verify(k+1) + draft + overhead) / plain;
   the target needs the smallest such tau over k (a round of k drafts yields at most k + 1).
2. The curve: held-out greedy tau capped at 3 drafts of the shipped DSpark and DFlash runs against
   training steps, fitted as tau = a + b * log2(steps) on the constant-rate points (300-1800).
3. Doublings of the 2,000-step budget for the bench tau of each suite to reach the requirement, if
   bench tau grew as fast as held-out tau does (it is lower: other prompts).

Usage: python docs/results/session9/budget_to_target.py   (reads docs/results/ only)"""

import json
import math
import re
from pathlib import Path

R = Path(__file__).resolve().parents[1]
steps_ms = {
    int(m[1]): float(m[2])
    for m in re.finditer(
        r"^\| (\d+) \| ([\d.]+) \|", (R / "bench-session8/calibrate-before.md").read_text(), re.M
    )
}
ENGINE_MS = float(
    re.search(r"engine overhead \| ([\d.]+)", (R / "bench-session8/plan-vs-measured.md").read_text())[1]
)
draft_ms = {}
for line in (R / "bench-session8/plan-vs-measured.md").read_text().splitlines():
    cells = [c.strip() for c in line.strip("|").split("|")]
    if len(cells) == 10 and cells[1] == "dspark":
        draft_ms[cells[0]] = float(cells[4])
bench = json.loads((R / "bench-session8/bench.json").read_text())
position = {s["suite"]: s["acceptance_by_position"] for s in bench["summaries"] if s["method"] == "dspark"}


def step(n: int) -> float:
    """The planner's T(n): the calibrated table plus the engine's work per round."""
    return steps_ms[n] + ENGINE_MS


def gaps(suite: str, speedup: float) -> list[tuple[int, float, float]]:
    """(k, tau a round of k drafts needs for the speedup, tau it yields now) for k = 1..3: the
    planner's S = E x T(1) / (drafting + T(k + 1)); now = 1 + the bench's acceptance at 1..k."""
    rates = position[suite]
    out = []
    for k in range(1, 4):
        need = speedup * (draft_ms[suite] + step(k + 1)) / step(1)
        out.append((k, need, 1 + sum(rates[:k])))
    return out


def fit(method: str) -> tuple[float, float, list]:
    rows = [json.loads(line) for line in (R / f"train-log-smollm2-{method}.jsonl").open()]
    pts = [(r["step"], r["held_out_tau_greedy_k3"]) for r in rows if "held_out_tau_greedy_k3" in r]
    xs = [(math.log2(s), t) for s, t in pts if 300 <= s <= 1800]
    mx, my = sum(x for x, _ in xs) / len(xs), sum(y for _, y in xs) / len(xs)
    b = sum((x - mx) * (y - my) for x, y in xs) / sum((x - mx) ** 2 for x, _ in xs)
    return my - b * mx, b, pts


for method in ("dspark", "dflash"):
    a, b, pts = fit(method)
    print(f"{method}: held-out greedy tau (<= 3 drafts) = {a:.3f} + {b:.3f} * log2(steps); points {pts}")
a, b, _ = fit("dspark")
print()
print("| suite | target | k | tau needed | tau now (1 + bench acc@1..k) | gap | doublings | steps |")
print("|---|---|---|---|---|---|---|---|")
for suite, target in (("humaneval", 2.0), ("gsm", 2.0), ("mtbench", 1.3), ("alpaca", 1.3)):
    for k, need, now in gaps(suite, target):
        if need > k + 1:
            print(
                f"| {suite} | {target}x | {k} | {need:.2f} (> {k + 1}: impossible) | {now:.2f} | - | - | - |"
            )
            continue
        d = (need - now) / b
        cells = [suite, f"{target}x", k, f"{need:.2f}", f"{now:.2f}", f"+{need - now:.2f}", f"{d:.1f}"]
        print("| " + " | ".join(map(str, cells)) + f" | {2000 * 2**d:,.0f} |")
