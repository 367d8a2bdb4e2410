"""Speculation in llama.cpp: its verify-cost curve, measured with llama-bench, and what it predicts.

In llama.cpp a k-token verify step costs more than a 1-token step wherever its kernels are not
bandwidth-bound at k rows (on a 2-core CPU T(4) is ~1.8 T(1)), so speedups measured in draftsmith's
engine, whose fixed-shape steps cost the same at 1..4 rows, do not carry over. Here a round costs
T(1 + drafts) + drafting, and yields tau tokens:

    speedup = (prefill + n T(1)) / (prefill + n / tau (T(1 + d) + draft))

with n tokens an answer, d drafts a round and tau tokens per target step, read from a bench's
llama.cpp peers (their counters and statistics); T from `llama-bench -p 1,2,...` on the target.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from draftsmith.errors import DraftsmithError

TOKENS = (1, 2, 3, 4, 5, 6, 8, 12, 16)


@dataclass(frozen=True)
class VerifyCurve:
    """Seconds of one llama.cpp forward step of k tokens, measured at a few k (interpolated between)."""

    tokens: tuple[int, ...]
    seconds: tuple[float, ...]
    source: str

    def step_s(self, k: float) -> float:
        ks, ss = self.tokens, self.seconds
        if k <= ks[0]:
            return ss[0]
        for i in range(1, len(ks)):
            if k <= ks[i]:
                return ss[i - 1] + (ss[i] - ss[i - 1]) * (k - ks[i - 1]) / (ks[i] - ks[i - 1])
        return ss[-1] * k / ks[-1]  # past the last point: as many rows again cost as much again

    def relative(self) -> dict[int, float]:
        return {k: round(s / self.seconds[0], 3) for k, s in zip(self.tokens, self.seconds, strict=True)}


def measure_curve(model: str | Path, threads: int, tokens=TOKENS, repeats: int = 5) -> VerifyCurve:
    """`llama-bench -p 1,2,... -n 0`: the time of a k-token step for each k (prompt processing of k
    tokens is one forward of k rows, as a verify step is)."""
    from draftsmith.deploy import llamacpp

    cmd = [str(llamacpp.binary("llama-bench")), "-m", str(model), "-p", ",".join(map(str, tokens))]
    cmd += ["-n", "0", "-r", str(repeats), "-t", str(threads), "-o", "json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:]
        raise DraftsmithError(f"llama-bench failed: {tail[0] if tail else 'no output'}")
    rows = json.loads(proc.stdout)
    per = {int(r["n_prompt"]): int(r["n_prompt"]) / float(r["avg_ts"]) for r in rows if r.get("n_prompt")}
    ks = tuple(sorted(per))
    return VerifyCurve(ks, tuple(per[k] for k in ks), f"llama-bench -p {','.join(map(str, ks))} -t {threads}")


@dataclass(frozen=True)
class PeerPrediction:
    suite: str
    method: str
    tau: float
    drafts: float  # drafted tokens per round
    draft_ms: float  # drafting a round
    verify_ms: float  # T(1 + drafts) from the curve
    predicted: float
    measured: float | None

    def to_json(self) -> dict:
        return asdict(self)


def predict(
    curve: VerifyCurve, tau: float, drafts: float, draft_s: float, tokens: float, prefill_s: float
) -> float:
    """The speedup over llama.cpp plain decoding of a method with this acceptance and drafting cost."""
    plain = prefill_s + tokens * curve.step_s(1)
    spec = prefill_s + tokens / max(tau, 1.0) * (curve.step_s(1 + drafts) + draft_s)
    return plain / spec


def compare(curve: VerifyCurve, bench_path: str | Path) -> list[PeerPrediction]:
    """Predicted against measured speedup for every llama.cpp peer that drafted in a bench result."""
    data = json.loads(Path(bench_path).read_text())
    out = []
    for s in data["summaries"]:
        method = s["method"]
        if not method.startswith("llamacpp-") or method == "llamacpp-plain" or not s.get("rounds"):
            continue
        recs = [
            r
            for r in data["records"]
            if r["method"] == method and s["suite"] in ("all", r["suite"]) and r.get("stats")
        ]
        if not recs:
            continue
        stats = [r["stats"] for r in recs]
        rounds = sum(x["rounds"] for x in stats)
        drafts = sum(x["drafted"] for x in stats) / rounds
        draft_s = sum(x["draft_s"] for x in stats) / rounds
        tokens = sum(x["new_tokens"] for x in stats) / len(stats)
        prefill = sum(x["prefill_s"] for x in stats) / len(stats)
        pred = predict(curve, s["tau"], drafts, draft_s, tokens, prefill)
        out.append(
            PeerPrediction(
                s["suite"],
                method,
                s["tau"],
                round(drafts, 2),
                round(1000 * draft_s, 2),
                round(1000 * curve.step_s(1 + drafts), 2),
                round(pred, 3),
                s.get("speedup_median"),
            )
        )
    return out


def break_even(curve: VerifyCurve, draft_s: float, drafts: int = 3) -> float:
    """The tau a method needs to match plain decoding at d drafts a round and this drafting cost."""
    return (curve.step_s(1 + drafts) + draft_s) / curve.step_s(1)


def report(curve: VerifyCurve, rows: list[PeerPrediction]) -> str:
    lines = [f"## llama.cpp verify cost on this machine ({curve.source})", ""]
    lines += ["| tokens in the step | " + " | ".join(map(str, curve.tokens)) + " |"]
    lines += ["|---|" + "---|" * len(curve.tokens)]
    lines += ["| ms | " + " | ".join(f"{1000 * s:.2f}" for s in curve.seconds) + " |"]
    lines += ["| relative to 1 | " + " | ".join(f"{v:.2f}" for v in curve.relative().values()) + " |", ""]
    if rows:
        lines += [
            "## Predicted against measured, llama.cpp peers (the bench's tau and drafting time, this curve)",
            "",
            "| suite | method | tau | drafts a round | drafting ms | verify ms | predicted | measured |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            m = "-" if r.measured is None else f"{r.measured:.2f}x"
            lines.append(
                f"| {r.suite} | {r.method} | {r.tau:.2f} | {r.drafts:.2f} | {r.draft_ms:.2f} | "
                f"{r.verify_ms:.2f} | {r.predicted:.2f}x | {m} |"
            )
        lines.append("")
    lines.append(
        "Break-even tau at 3 drafts a round (speedup 1.0), by drafting cost: "
        + ", ".join(
            f"{int(f * 100)}% of a step: {break_even(curve, f * curve.step_s(1)):.2f}"
            for f in (0.0, 0.25, 0.5, 1.0)
        )
    )
    return "\n".join(lines)
