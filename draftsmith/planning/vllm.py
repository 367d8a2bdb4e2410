"""Speculation in vLLM: its verify-cost curve and each drafter's cost a round, both timed inside vLLM
on this machine, and the speedups they predict for the bench's vLLM peers.

vLLM's server reports acceptance but no timings, so draftsmith runs vLLM in-process
(deploy/vllm_profile.py) and times its engine steps and the drafting inside them:
- the curve V(k): an engine step that verifies k tokens, drafting excluded, from vLLM's own n-gram
  drafting at 1..7 drafts a round on a prompt that repeats (nearly every round drafts them all), and
  V(1) from plain decoding. Unlike draftsmith's fixed-shape steps or llama-bench's prompt steps, this
  is vLLM's whole round around the forward: scheduling, logits at every row, rejection sampling;
- a drafter's cost a round D: the same profile on a few prompts with its export;
- tau per target step from a bench's vLLM peers (`draftsmith bench` with vllm-* methods). Then

    speedup = (prefill + n V(1)) / (prefill + n / tau (V(1 + d) + D))

with the prefill the profile's prompt pass and n the bench's answer length.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from draftsmith.errors import DraftsmithError
from draftsmith.planning.llamacpp import REPEAT_PROMPT
from draftsmith.planning.verify_curve import (
    PeerPrediction,
    VerifyCurve,
    break_even_line,
    curve_lines,
    predict,
    prediction_lines,
)

DRAFTS = (1, 2, 3, 4, 5, 6, 7)
PROBES = (
    "Write a Python function that returns the n-th Fibonacci number.",
    "Name three things that make a good cup of tea, and say why.",
    "What is 17 times 23? Explain step by step.",
)
"""Prompts on which each drafter's cost a round is timed (what it drafts does not change its cost)."""


def profile(model: str, dtype: str, runs: list[dict], threads: int, log: Path, timeout: float = 900) -> dict:
    """Run deploy/vllm_profile.py in vLLM's python, one process a run (vLLM builds one engine a
    process): {run name: {"steps": [[tokens, step_s, draft_s], ...], "prefill_steps": [...]}}."""
    from draftsmith.deploy import vllm

    found: dict = {}
    for run in runs:
        request = {"model": model, "dtype": dtype, "runs": [run]}
        found.update(
            vllm.run_script("vllm_profile.py", request, threads, log, "VLLM_PROFILE", timeout)["runs"]
        )
    return found


def ngram_config(drafts: int) -> dict:
    return {
        "method": "ngram",
        "num_speculative_tokens": drafts,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 3,
    }


def curve_runs(tokenizer, drafts=DRAFTS, tokens: int = 96) -> list[dict]:
    """Plain decoding and n-gram drafting at each draft count, on the repeating prompt."""
    repeat_ids = tokenizer.encode(REPEAT_PROMPT)
    runs = [{"name": "plain", "speculative_config": None, "prompts": [repeat_ids], "max_tokens": tokens}]
    for d in drafts:
        runs.append(
            {
                "name": f"ngram-{d}",
                "speculative_config": ngram_config(d),
                "prompts": [repeat_ids],
                "max_tokens": tokens,
            }
        )
    return runs


def curve_from(runs: dict, source: str) -> VerifyCurve:
    """V(k): the median engine step of k tokens, drafting excluded (k = 1: plain decoding)."""
    per: dict[int, float] = {}
    for name, run in runs.items():
        k = 1 if name == "plain" else 1 + int(name.removeprefix("ngram-"))
        steps = [s - d for n, s, d in run["steps"] if n == k]
        if len(steps) >= 3:  # a draft count the repeating prompt rarely filled is left out
            per[k] = statistics.median(steps)
    if 1 not in per or len(per) < 2:
        raise DraftsmithError("vLLM's profile gave too few verify steps to draw a curve")
    ks = tuple(sorted(per))
    return VerifyCurve(ks, tuple(per[k] for k in ks), source)


@dataclass(frozen=True)
class DraftCost:
    """What drafting costs a round in vLLM (the profile's median), and its prompt pass."""

    method: str
    drafts: int
    draft_s: float
    prefill_s: float


def draft_cost(name: str, run: dict, drafts: int) -> DraftCost:
    draft = [d for _, _, d in run["steps"]]
    prefill = [s for _, s, _ in run["prefill_steps"]]
    if not draft:
        raise DraftsmithError(f"vLLM's profile of {name} has no decode steps")
    return DraftCost(name, drafts, statistics.median(draft), statistics.median(prefill) if prefill else 0.0)


def round_verify_s(curve: VerifyCurve, summary: dict, stats: list[dict]) -> tuple[float, float]:
    """(drafts a round, verify seconds a round). A method that drafts every round (EAGLE-3, DFlash)
    verifies 1 + d tokens each time. One that drafts only where it finds something (n-gram) mixes
    1-token steps with steps of 1 + (its drafts where it drafted): vLLM's accepted length per drafted
    round (`tau_drafted`) says how many rounds drafted, and the mix is priced step by step."""
    rounds = sum(x["rounds"] for x in stats)
    drafted = sum(x["drafted"] for x in stats)
    accepted = sum(x["accepted"] for x in stats)
    d = drafted / rounds
    per_drafted = summary.get("tau_drafted")
    if not per_drafted or per_drafted <= 1 or not accepted:
        return d, curve.verify_s(1 + d)
    drafting_rounds = min(accepted / (per_drafted - 1), rounds)
    share = drafting_rounds / rounds
    size = drafted / drafting_rounds
    return d, (1 - share) * curve.verify_s(1) + share * curve.verify_s(1 + size)


def compare(curve: VerifyCurve, costs: dict[str, DraftCost], bench_path: str | Path) -> list[PeerPrediction]:
    """Predicted against measured speedup over vllm-plain for every vLLM peer that drafted in a bench
    (tau per target step from the bench; the curve, drafting cost and prompt pass from the profile)."""
    data = json.loads(Path(bench_path).read_text())
    prefill = statistics.median([c.prefill_s for c in costs.values()]) if costs else 0.0
    out = []
    for s in data["summaries"]:
        method = s["method"]
        if method not in costs or method == "vllm-plain" or not s.get("tau"):
            continue
        recs = [
            r["stats"]
            for r in data["records"]
            if r["method"] == method and s["suite"] in ("all", r["suite"]) and r.get("stats")
        ]
        if not recs:
            continue
        drafts, verify = round_verify_s(curve, s, recs)
        tokens = sum(x["new_tokens"] for x in recs) / len(recs)
        draft_s = costs[method].draft_s
        pred = predict(curve, s["tau"], drafts, draft_s, tokens, prefill, verify_s=verify)
        out.append(
            PeerPrediction(
                s["suite"],
                method,
                s["tau"],
                round(drafts, 2),
                round(1000 * draft_s, 2),
                round(1000 * verify, 2),
                round(pred, 3),
                s.get("speedup_median"),
            )
        )
    return out


def report(curve: VerifyCurve, costs: dict[str, DraftCost], rows: list[PeerPrediction]) -> str:
    lines = curve_lines(curve, "vLLM verify cost on this machine")
    if costs:
        lines += ["## Drafting a round in vLLM (median, timed inside its engine)", ""]
        lines += [
            "| method | drafts a round | drafting ms | that + V(1 + drafts), in plain steps |",
            "|---|---|---|---|",
        ]
        for c in costs.values():
            total = (c.draft_s + curve.verify_s(1 + c.drafts)) / curve.step_s(1)
            lines.append(f"| {c.method} | {c.drafts} | {1000 * c.draft_s:.2f} | {total:.2f} |")
        lines.append("")
    title = "Predicted against measured, vLLM peers (the bench's tau, this curve, the drafting above)"
    lines += prediction_lines(rows, title)
    lines.append(break_even_line(curve))
    return "\n".join(lines)
