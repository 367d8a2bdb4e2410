"""Speculation in llama.cpp: its verify-cost curve, measured with llama-bench, and what it predicts.

In llama.cpp a k-token verify step costs more than a 1-token step wherever its kernels are not
bandwidth-bound at k rows (on a 2-core CPU T(4) is ~1.8 T(1)), so speedups measured in draftsmith's
engine, whose fixed-shape steps cost the same at 1..4 rows, do not carry over. Here a round costs
V(1 + d) + drafting, and yields tau tokens:

    speedup = (prefill + n T(1)) / (prefill + n / tau (V(1 + d) + draft))

with n tokens an answer, d drafts a round and tau tokens per target step, read from a bench's
llama.cpp peers (their counters and statistics); T from `llama-bench -p 1,2,...` on the target.
A verify step V(k) costs more than llama-bench's k-token step T(k): the server computes logits at,
and samples from, all k positions where llama-bench's prompt step computes the last one only. So
V(k) = T(k) + (k - 1) r, with r measured in llama-server itself by its own n-gram drafting on a
prompt that repeats (no trained drafter needed; `measure_row_cost`).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from draftsmith.errors import DraftsmithError
from draftsmith.planning.verify_curve import (
    PeerPrediction,
    VerifyCurve,
    break_even,
    break_even_line,
    curve_lines,
    predict,
    prediction_lines,
)

__all__ = ["PeerPrediction", "VerifyCurve", "break_even", "predict"]  # with the measurement below

TOKENS = (1, 2, 3, 4, 5, 6, 8, 12, 16)


def measure_curve(model: str | Path, threads: int, tokens=TOKENS, repeats: int = 10) -> VerifyCurve:
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


REPEAT_PROMPT = "A B C D E F G H I J K L M N O P Q R S T U V W X Y Z\n" * 8
"""A prompt a language model continues by repeating it: llama.cpp's n-gram drafting then drafts
(and is accepted) at nearly every round, so its rounds are verify steps of several tokens with no
drafter to time."""


def measure_row_cost(model: str | Path, curve: VerifyCurve, threads: int, draft_max: int = 3) -> VerifyCurve:
    """`curve` with `row_s` measured: llama-server with `--spec-type ngram-simple` answers
    REPEAT_PROMPT; each round's time beyond llama-bench's step of the same tokens, per drafted row."""
    from draftsmith.evaluation.llamacpp_peers import LlamaServerPeer, completion, ngram_args

    log = Path(tempfile.mkdtemp(prefix="draftsmith-rowcost-")) / "llama-server.log"
    args = [*ngram_args(draft_max), "-lv", "1"]
    peer = LlamaServerPeer("row-cost", args, Path(model), threads, log, frozenset())
    try:
        timings = [completion(peer.port, REPEAT_PROMPT, 128)["timings"] for _ in range(2)]
    finally:
        peer.close()
    tokens = sum(t["predicted_n"] for t in timings)
    accepted = sum(t.get("draft_n_accepted", 0) for t in timings)
    rounds = max(tokens - accepted, 1)
    drafts = sum(t.get("draft_n", 0) for t in timings) / rounds
    if drafts < 0.5:
        raise DraftsmithError(
            f"llama-server's n-gram drafting drafted {drafts:.2f} tokens a round on the repeating prompt: "
            "too few to measure its verify steps"
        )
    round_s = sum(t["predicted_ms"] for t in timings) / 1000 / rounds
    row_s = max((round_s - curve.step_s(1 + drafts)) / drafts, 0.0)
    source = f"{curve.source}; llama-server: {1000 * row_s:.2f} ms a verified row (n-gram drafts)"
    return replace(curve, row_s=row_s, source=source)


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
                round(1000 * curve.verify_s(1 + drafts), 2),
                round(pred, 3),
                s.get("speedup_median"),
            )
        )
    return out


@dataclass(frozen=True)
class PlainPrediction:
    suite: str
    tokens: float  # mean answer length
    prefill_ms: float  # mean prompt processing, as the bench's llama.cpp peers measured it
    predicted: float  # tok/s: tokens / (prefill + tokens T(1))
    measured: float | None

    def to_json(self) -> dict:
        return asdict(self)


def compare_plain(curve: VerifyCurve, bench_path: str | Path) -> list[PlainPrediction]:
    """llama.cpp's plain decoding, predicted from the curve's 1-token step against the bench's
    llamacpp-plain tok/s (its prompt processing taken from the drafting peers' counters)."""
    data = json.loads(Path(bench_path).read_text())
    out = []
    for s in data["summaries"]:
        if s["method"] != "llamacpp-plain":
            continue
        suite = [r for r in data["records"] if s["suite"] in ("all", r["suite"])]
        plain = [r for r in suite if r["method"] == "llamacpp-plain"]
        prefill = [
            r["stats"]["prefill_s"] for r in suite if r["method"].startswith("llamacpp-") and r.get("stats")
        ]
        if not plain or not prefill:
            continue
        tokens = sum(len(r["tokens"]) for r in plain) / len(plain)
        pre = sum(prefill) / len(prefill)
        pred = tokens / (pre + tokens * curve.step_s(1))
        out.append(
            PlainPrediction(
                s["suite"], round(tokens, 1), round(1000 * pre, 1), round(pred, 1), s.get("tok_s_median")
            )
        )
    return out


def report(curve: VerifyCurve, rows: list[PeerPrediction], plain: list[PlainPrediction] = ()) -> str:
    lines = curve_lines(curve, "llama.cpp verify cost on this machine")
    if curve.row_s:
        lines += [
            f"llama-server's verify step adds {1000 * curve.row_s:.2f} ms for each row beyond the first "
            "(logits and sampling at every row; measured with its n-gram drafting).",
            "",
        ]
    if plain:
        lines += [
            "## Plain decoding: predicted against measured (the curve's 1-token step, the bench's prefill)",
            "",
            "| suite | tokens | prefill ms | predicted tok/s | measured tok/s |",
            "|---|---|---|---|---|",
        ]
        for p in plain:
            m = "-" if p.measured is None else f"{p.measured:.1f}"
            lines.append(f"| {p.suite} | {p.tokens:.0f} | {p.prefill_ms:.0f} | {p.predicted:.1f} | {m} |")
        lines.append("")
    title = "Predicted against measured, llama.cpp peers (the bench's tau and drafting time, this curve)"
    lines += prediction_lines(rows, title)
    lines.append(break_even_line(curve))
    return "\n".join(lines)
