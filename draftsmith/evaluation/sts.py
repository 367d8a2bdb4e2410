"""Sequential temperature scaling (STS) of DSpark's confidence head, fitted on held-out decoding.

The scheduler trusts the prefix survival a_j = prod_{i<=j} c_i as the probability that draft
slots 0..j are all accepted. A head trained with BCE per slot can still be miscalibrated on the
product. STS (DSpark paper) fits one temperature per position, left to right: T_j is the grid
value that minimises the ECE of a_j (with T_0..T_{j-1} already fixed) against "slots 0..j were all
accepted", over every round that drafted slot j. c_i = sigmoid(logit_i / T_i + b_i): by default
the fit also searches a logit bias b_i per position (then minimising the log loss, see `fit`),
because a temperature cannot move confidences near 0.5: a head trained on data it has memorised
is overconfident on new text by an offset (the 4,000-step drafter of: mean 0.53
against 0.44 accepted at the first slot), which only a bias removes. Temperatures and biases are
stored next to the drafter (`sts.json`) and the drafter applies them when it reports confidences.
Fit on one half of the prompts, report ECE on the other half, ship the fit on all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from draftsmith.drafters.checkpoint import STS_FILE, sts_confidence
from draftsmith.engine.decode import speculative_generate
from draftsmith.engine.drafter import Drafter
from draftsmith.engine.sampling import SamplingParams
from draftsmith.engine.verify import verify
from draftsmith.errors import DraftsmithError
from draftsmith.evaluation.reliability import ece
from draftsmith.models.target import Target

if TYPE_CHECKING:
    from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions

GRID = tuple(round(0.25 * 2 ** (i / 8), 4) for i in range(41))  # 0.25 .. 8, geometric
BIASES = tuple(round(-2.0 + 0.125 * i, 3) for i in range(33))  # -2 .. 2 in logit units


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
    saved = getattr(drafter, "temperatures", ()), getattr(drafter, "biases", ())
    drafter.temperatures, drafter.biases = (), ()  # raw logits only

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
        drafter.temperatures, drafter.biases = saved
    return rounds


def cumulative_pairs(
    rounds: Sequence[Round], temps: Sequence[float], j: int, biases: Sequence[float] = ()
) -> list[tuple[float, bool]]:
    """(a_j, slots 0..j all accepted) over the rounds that drafted slot j."""
    pairs = []
    for r in rounds:
        if len(r.logits) > j:
            a = math.prod(sts_confidence(r.logits[i], i, temps, biases) for i in range(j + 1))
            pairs.append((a, r.accepted > j))
    return pairs


def _grid_scores(prefix: torch.Tensor, z: torch.Tensor, ok: torch.Tensor, temps, biases, log_loss: bool):
    """For every (T, b): the ECE (calibration.ece's equal-width bins) or the log loss of
    a_j = prefix * sigmoid(z / T + b) against ok, as a [len(temps), len(biases)] table."""
    t = torch.tensor(temps, dtype=torch.float64)[:, None, None]
    b = torch.tensor(biases, dtype=torch.float64)[None, :, None]
    c = (prefix * torch.sigmoid(z / t + b)).reshape(len(temps) * len(biases), -1)
    if log_loss:
        c = c.clamp(1e-9, 1 - 1e-9)
        scores = -(ok * c.log() + (1 - ok) * (1 - c).log()).mean(1)
    else:
        bins = 10
        idx = (c * bins).long().clamp(max=bins - 1)
        conf = torch.zeros(c.shape[0], bins, dtype=torch.float64).scatter_add_(1, idx, c)
        acc = torch.zeros_like(conf).scatter_add_(1, idx, ok.expand_as(c))
        scores = (conf - acc).abs().sum(1) / c.shape[1]
    return scores.reshape(len(temps), len(biases))


def fit(
    rounds: Sequence[Round], positions: int | None = None, bias: bool = True
) -> tuple[list[float], list[float]]:
    """Per-position temperatures and logit biases, fitted left to right; among equal scores the
    pair nearest T = 1, b = 0 wins. ``bias=False`` is the paper's STS: temperatures minimising the
    ECE. With a bias the fit minimises the log loss instead: binned ECE scores ~0 for confidences
    all flattened to the mean accept rate, which a bias can reach, while a proper score keeps the
    spread that tells one draft from another."""
    positions = positions or max((len(r.logits) for r in rounds), default=0)
    biases_grid = BIASES if bias else (0.0,)
    temps: list[float] = []
    biases: list[float] = []
    for j in range(positions):
        drafted = [r for r in rounds if len(r.logits) > j]
        if not drafted:
            break
        prefix = torch.tensor(
            [math.prod(sts_confidence(r.logits[i], i, temps, biases) for i in range(j)) for r in drafted],
            dtype=torch.float64,
        )
        z = torch.tensor([r.logits[j] for r in drafted], dtype=torch.float64)
        ok = torch.tensor([float(r.accepted > j) for r in drafted], dtype=torch.float64)
        scores = _grid_scores(prefix, z, ok, GRID, biases_grid, log_loss=bias)
        best = min(
            (float(scores[a, c]), abs(math.log(t)) + abs(b), a, c)
            for a, t in enumerate(GRID)
            for c, b in enumerate(biases_grid)
        )
        temps.append(GRID[best[2]])
        biases.append(biases_grid[best[3]])
    return temps, biases


def report(rounds: Sequence[Round], temps: Sequence[float], biases: Sequence[float] = ()) -> list[dict]:
    """Per position: rounds, accept rate of the prefix, mean a_j and ECE before/after scaling."""
    rows = []
    for j in range(len(temps)):
        before, after = cumulative_pairs(rounds, (), j), cumulative_pairs(rounds, temps, j, biases)
        if not before:
            break
        rows.append(
            {
                "position": j + 1,
                "rounds": len(before),
                "prefix_accept_rate": round(sum(ok for _, ok in before) / len(before), 4),
                "temperature": temps[j],
                "bias": biases[j] if j < len(biases) else 0.0,
                "mean_survival_before": round(sum(a for a, _ in before) / len(before), 4),
                "mean_survival_after": round(sum(a for a, _ in after) / len(after), 4),
                "ece_before": round(ece(before), 4),
                "ece_after": round(ece(after), 4),
            }
        )
    return rows


def save(path: Path, temps: Sequence[float], meta: dict, biases: Sequence[float] = ()) -> Path:
    out = path / STS_FILE if path.is_dir() else path
    body = {"temperatures": list(temps), "biases": list(biases) or [0.0] * len(temps), **meta}
    out.write_text(json.dumps(body, indent=1) + "\n")
    return out


HELD_OUT = Path(__file__).resolve().parent / "data" / "sts-prompts.jsonl"
"""128 held-out prompts of the default target's training mix (never trained on; shipped in the package)."""


def held_out_prompts(path: str | Path | None, limit: int) -> list[str]:
    """Prompts from a .jsonl[.gz] file of rows with a "prompt" (default: the shipped held-out set)."""
    from draftsmith.training.jsonl import read_rows

    source = Path(path) if path else HELD_OUT
    if not source.is_file():
        raise DraftsmithError(
            f"prompts file not found: {source}"
            + ("" if path else " (reinstall draftsmith, or pass --prompts FILE)")
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


def run_sts(
    target: Target, method: str, options: DFlashDecodeOptions, prompts: Sequence[str], args
) -> tuple[dict, Path]:
    """Decode, fit on the even prompts, report on the odd ones, store the fit on all (with the drafter
    `options` names, else the shipped one, unless args.out says where)."""
    from draftsmith.drafters.checkpoint import shipped_drafter
    from draftsmith.drafters.registry import build_drafter

    drafter = build_drafter(method, target, options)
    if not hasattr(drafter, "confidence_logits") or not drafter.cfg.confidence:
        raise DraftsmithError(f"method {method!r} has no confidence head to calibrate")
    ids = [target.encode(p, chat=True) for p in prompts]
    rounds = [collect(target, drafter, [x], args.max_new_tokens) for x in ids]
    fit_rounds = [r for i, rs in enumerate(rounds) if i % 2 == 0 for r in rs]
    test_rounds = [r for i, rs in enumerate(rounds) if i % 2 == 1 for r in rs]
    bias = not args.no_bias
    held_out = report(test_rounds, *fit(fit_rounds, bias=bias))
    temps, biases = fit([r for rs in rounds for r in rs], bias=bias)
    where = Path(args.out) if args.out else Path(options.drafter or shipped_drafter(method, target))
    meta = {
        "prompts": len(prompts),
        "rounds": sum(len(rs) for rs in rounds),
        "max_new_tokens": args.max_new_tokens,
        "held_out_report": held_out,
    }
    result = {"temperatures": temps, "biases": biases, "held_out": held_out}
    return result, save(where, temps, meta, biases)
