"""Issue 8: how far the shipped lineage is from its targets, and what training budget the measured
curve says would reach them. An extrapolation from measured points, not a measurement.

The points are the interleaved benches of the shipped lineage on one machine and mode (sessions 34-40:
the 2-core AMD EPYC with AVX-512 BF16, bf16 packed, 4 fixed rows; docs/BENCHMARKS.md, lines cited
in docs/results/session44/lineage.md), from the first drafters that read lookup guesses (session 33's
recipe) on. Budget = anchor blocks seen by the lineage (steps x batch x anchors, cumulative from
session 20's 4,000-step root). The tau needed for 2.0x comes from the given bench records: a round
costs tau / speedup plain steps there, so 2.0x needs tau = 2.0 x that (drafting cost unchanged).
Usage: python docs/results/session44/budget_curve.py BENCH.json [BENCH.json ...]
"""

import json
import math
import sys

SUITES = ("humaneval", "mtbench", "gsm", "alpaca", "all")
# (cumulative anchor blocks, bench tau per suite): DSpark S34, S35, S38, S40; DFlash S33, S35, S39, S40
DSPARK = [
    (2_662_400, (2.05, 1.60, 2.02, 1.69, 1.79)),
    (2_969_600, (2.12, 1.56, 2.04, 1.70, 1.80)),
    (3_558_400, (2.16, 1.63, 2.13, 1.75, 1.86)),
    (3_609_600, (2.15, 1.67, 2.11, 1.75, 1.87)),
]
DFLASH = [
    (2_355_200, (1.87, 1.46, 1.82, 1.51, 1.62)),
    (2_662_400, (1.89, 1.52, 1.92, 1.55, 1.67)),
    (3_558_400, (1.97, 1.54, 1.98, 1.59, 1.72)),
    (3_609_600, (1.96, 1.57, 1.98, 1.61, 1.74)),
]
# bench tau ratio DSpark / DFlash at equal budget, every lineage and machine (lineage.md, section 4)
RATIO = [(1_024_000, 1.05), (2_048_000, 1.07), (2_662_400, 1.07), (3_558_400, 1.08), (3_609_600, 1.075)]


def slope(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares line y = a + b log2(x): (a, b), b = gain per doubling of the budget."""
    xs = [math.log2(x) for x, _ in points]
    ys = [y for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


TARGET = {"humaneval": 2.0, "gsm": 2.0, "mtbench": 1.3, "alpaca": 1.3}
"""Issue 8's speedups over plain decoding."""


def bench_taus(path: str) -> dict[str, tuple[float, float]]:
    """Per suite, this bench's DSpark tau and the tau at which its rounds would give the target."""
    rows = json.load(open(path))["summaries"]
    return {
        r["suite"]: (r["tau"], TARGET[r["suite"]] * r["tau"] / r["speedup_median"])
        for r in rows
        if r["method"] == "dspark" and r["suite"] in TARGET
    }


def main(benches: list[str]) -> None:
    now = DSPARK[-1][0]
    print("Slope per doubling of the budget from the lineage (method, suite, gain per doubling):")
    slopes = {}
    for name, pts in (("DSpark", DSPARK), ("DFlash", DFLASH)):
        for i, suite in enumerate(SUITES):
            slopes[name, suite] = slope([(x, t[i]) for x, t in pts])[1]
            print(f"  {name} {suite}: {slopes[name, suite]:+.3f}")
    print("\n| bench | suite | DSpark tau | target | tau needed | doublings | anchor blocks | x today |")
    print("|---|---|---|---|---|---|---|---|")
    for path in benches:
        for suite, (tau, need) in bench_taus(path).items():
            if tau >= need:
                print(f"| {path} | {suite} | {tau:.2f} | {TARGET[suite]}x | {need:.2f} | met | | |")
                continue
            d = (need - tau) / slopes["DSpark", suite]
            print(f"| {path} | {suite} | {tau:.2f} | {TARGET[suite]}x | {need:.2f} | {d:.2f} | "
                  f"{now * 2**d / 1e6:.1f}M | {2**d:.1f}x |")
    a, b = slope(RATIO)
    x = 2 ** ((1.15 - a) / b)
    print(f"\nbench tau ratio DSpark / DFlash: {b:+.4f} per doubling; 1.15x at ~{x / 1e6:.0f}M anchor blocks "
          f"({x / now:.0f}x today's {now / 1e6:.2f}M)")


if __name__ == "__main__":
    main(sys.argv[1:])
