"""Sequential temperature scaling (STS) of DSpark's confidence head, fitted on held-out decoding.

The scheduler trusts the prefix survival a_j = prod_{i<=j} c_i as the probability that draft
slots 0..j are all accepted. A head trained with BCE per slot can still be miscalibrated on the
product. STS (DSpark paper) fits one temperature per position, left to right: T_j is the grid
value that minimises the ECE of a_j (with T_0..T_{j-1} already fixed) against "slots 0..j were all
accepted", over every round that drafted slot j. c_i = sigmoid(logit_i / T_i). The temperatures
are stored next to the drafter (`sts.json`) and the drafter applies them when it reports
confidences. Fit on one half of the prompts, report ECE on the other half, ship the fit on all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from draftsmith.drafters.base import Drafter
from draftsmith.drafters.checkpoint import STS_FILE
from draftsmith.engine.decode import speculative_generate
from draftsmith.engine.sampling import SamplingParams
from draftsmith.engine.verify import verify
from draftsmith.errors import DraftsmithError
from draftsmith.evaluation.calibration import ece
from draftsmith.models.target import Target

GRID = tuple(round(0.25 * 2 ** (i / 8), 4) for i in range(41))  # 0.25 .. 8, geometric


@dataclass
class Round:
    logits: list[float]  # the confidence head's raw logit per drafted slot
    accepted: int  # draft tokens the target kept


def collect(
    target: Target, drafter: Drafter, prompts: Sequence[list[int]], max_new_tokens: int = 128
) -> list[Round]:
    """Greedy decoding of every prompt with fixed-length drafts, recording each round's raw
    confidence logits and how many draft tokens were accepted."""
    rounds: list[Round] = []
    saved, drafter.temperatures = getattr(drafter, "temperatures", ()), ()  # raw logits only

    def recording(logits, draft, probs, params, rng):
        n_acc, bonus = verify(logits, draft, probs, params, rng)
        if len(draft):
            rounds.append(Round(list(drafter.confidence_logits[: len(draft)]), n_acc))
        return n_acc, bonus

    try:
        for ids in prompts:
            stop = target.stop_rule(max_new_tokens, ())
            speculative_generate(
                target.runner, drafter, ids, stop, SamplingParams(), verifier=recording, adaptive=False
            )
    finally:
        drafter.temperatures = saved
    return rounds


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def cumulative_pairs(rounds: Sequence[Round], temps: Sequence[float], j: int) -> list[tuple[float, bool]]:
    """(a_j, slots 0..j all accepted) over the rounds that drafted slot j."""
    pairs = []
    for r in rounds:
        if len(r.logits) > j:
            a = math.prod(_sigmoid(r.logits[i] / (temps[i] if i < len(temps) else 1.0)) for i in range(j + 1))
            pairs.append((a, r.accepted > j))
    return pairs


def fit(rounds: Sequence[Round], positions: int | None = None) -> list[float]:
    """Per-position temperatures, fitted left to right (ties go to the value nearest 1)."""
    positions = positions or max((len(r.logits) for r in rounds), default=0)
    temps: list[float] = []
    for j in range(positions):
        if not cumulative_pairs(rounds, temps, j):
            break
        temps.append(
            min(GRID, key=lambda t: (ece(cumulative_pairs(rounds, [*temps, t], j)), abs(math.log(t))))
        )
    return temps


def report(rounds: Sequence[Round], temps: Sequence[float]) -> list[dict]:
    """Per position: rounds, accept rate of the prefix, mean a_j and ECE before/after scaling."""
    rows = []
    for j in range(len(temps)):
        before, after = cumulative_pairs(rounds, (), j), cumulative_pairs(rounds, temps, j)
        if not before:
            break
        rows.append(
            {
                "position": j + 1,
                "rounds": len(before),
                "prefix_accept_rate": round(sum(ok for _, ok in before) / len(before), 4),
                "temperature": temps[j],
                "mean_survival_before": round(sum(a for a, _ in before) / len(before), 4),
                "mean_survival_after": round(sum(a for a, _ in after) / len(after), 4),
                "ece_before": round(ece(before), 4),
                "ece_after": round(ece(after), 4),
            }
        )
    return rows


def save(path: Path, temps: Sequence[float], meta: dict) -> Path:
    out = path / STS_FILE if path.is_dir() else path
    out.write_text(json.dumps({"temperatures": list(temps), **meta}, indent=1) + "\n")
    return out


HELD_OUT = Path(__file__).resolve().parents[2] / "data" / "smollm2" / "answers-held-out-t0.jsonl.gz"


def held_out_prompts(path: str | Path | None, limit: int) -> list[str]:
    """Prompts from a .jsonl[.gz] file of rows with a "prompt" (default: the shipped held-out set)."""
    from draftsmith.training.jsonl import read_rows

    source = Path(path) if path else HELD_OUT
    if not source.is_file():
        raise DraftsmithError(
            f"prompts file not found: {source}"
            + ("" if path else " (pass --prompts FILE outside the repository)")
        )
    prompts = []
    for row in read_rows(source):
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise DraftsmithError(f"{source}: every row needs a 'prompt' string")
        prompts.append(row["prompt"])
        if len(prompts) == limit:
            break
    if len(prompts) < 2:
        raise DraftsmithError(f"{source}: need at least 2 prompts, found {len(prompts)}")
    return prompts


def run_sts(target: Target, method: str, options: dict, prompts: Sequence[str], args) -> tuple[dict, Path]:
    """Decode, fit on the even prompts, report on the odd ones, store the fit on all."""
    from draftsmith.drafters.dflash.drafter import shipped_drafter
    from draftsmith.drafters.registry import build_drafter

    drafter = build_drafter(method, target, **options)
    if not hasattr(drafter, "confidence_logits") or not drafter.cfg.confidence:
        raise DraftsmithError(f"method {method!r} has no confidence head to calibrate")
    ids = [target.encode(p, chat=True) for p in prompts]
    rounds = [collect(target, drafter, [x], args.max_new_tokens) for x in ids]
    fit_rounds = [r for i, rs in enumerate(rounds) if i % 2 == 0 for r in rs]
    test_rounds = [r for i, rs in enumerate(rounds) if i % 2 == 1 for r in rs]
    held_out = report(test_rounds, fit(fit_rounds))
    temps = fit([r for rs in rounds for r in rs])
    where = Path(args.out) if args.out else Path(options.get("drafter") or shipped_drafter(method, target))
    meta = {
        "prompts": len(prompts),
        "rounds": sum(len(rs) for rs in rounds),
        "max_new_tokens": args.max_new_tokens,
        "held_out_report": held_out,
    }
    return {"temperatures": temps, "held_out": held_out}, save(where, temps, meta)
