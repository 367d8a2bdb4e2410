"""The batched step-cost table: seconds per step against slots in the step and rows per slot.

The schedulers (draft_length.py) trade expected accepted tokens against what a step costs, and on a
CPU that cost is flat for a few rows and then climbs (weights are read once per step, compute grows
with rows). `measure` times the padded [slots, rows] steps the slot runner really executes, at a
fixed context; `cached` keeps one table per model shape, dtype, machine and library version, like
the single-request calibration.
"""

from __future__ import annotations

import bisect
import hashlib
import json

import torch

from draftsmith.engine.cpu_load import OtherLoad, cacheable, cpu_name
from draftsmith.engine.lean_llama import LeanLlamaRunner
from draftsmith.engine.runner import now
from draftsmith.engine.slots import SlotRunner
from draftsmith.paths import data_dir

TABLE_VERSION = 4
"""In the cache key: a table from an older step or measurement is measured again (before 2, a lone
slot ran the padded, masked path; before 3, each shape was timed in one burst and not made monotone;
before 4, the lm_head followed the layers' layout: `LeanLlamaRunner.logits`)."""
SLOTS = (1, 2, 4, 8, 16, 32)
ROWS = (1, 2, 3, 4, 5, 6, 8)


class BatchCost:
    """cost(slots, rows) in seconds, interpolated linearly between measured points (and in slots
    proportionally beyond the largest measured)."""

    def __init__(self, table: dict[tuple[int, int], float]) -> None:
        if not table:
            raise ValueError("an empty cost table")
        self.table = dict(table)
        self.slots = sorted({b for b, _ in table})
        self.rows = sorted({r for _, r in table})

    @staticmethod
    def _between(grid: list[int], x: int) -> tuple[int, int, float]:
        if x <= grid[0]:
            return grid[0], grid[0], 0.0
        if x >= grid[-1]:
            return grid[-1], grid[-1], 0.0
        i = bisect.bisect_left(grid, x)
        lo, hi = grid[i - 1], grid[i]
        return (x, x, 0.0) if grid[i] == x else (lo, hi, (x - lo) / (hi - lo))

    def _at_rows(self, b: int, rows: int) -> float:
        lo, hi, w = self._between(self.rows, rows)
        t = (1 - w) * self.table[(b, lo)] + w * self.table[(b, hi)]
        return t * rows / hi if rows > self.rows[-1] else t

    def __call__(self, b: int, rows: int) -> float:
        lo, hi, w = self._between(self.slots, b)
        t = (1 - w) * self._at_rows(lo, rows) + w * self._at_rows(hi, rows)
        return t * b / hi if b > self.slots[-1] else t

    def to_json(self) -> dict[str, float]:
        return {f"{b}x{r}": t for (b, r), t in sorted(self.table.items())}

    @classmethod
    def from_json(cls, data: dict[str, float]) -> BatchCost:
        return cls({tuple(int(x) for x in key.split("x")): float(t) for key, t in data.items()})

    def markdown(self) -> str:
        head = "| slots \\ rows per slot | " + " | ".join(str(r) for r in self.rows) + " |"
        lines = [head, "|---" * (len(self.rows) + 1) + "|"]
        for b in self.slots:
            cells = " | ".join(f"{self.table[(b, r)] * 1e3:.1f}" for r in self.rows)
            lines.append(f"| {b} | {cells} |")
        return "\n".join(lines) + "\n(ms per step)"


@torch.inference_mode()
def measure(
    runner: LeanLlamaRunner,
    slots: tuple[int, ...] = SLOTS,
    rows: tuple[int, ...] = ROWS,
    context: int = 256,
    repeats: int = 5,
) -> BatchCost:
    """Time a step of every (slots, rows) shape with each slot holding `context` tokens.

    The grid is swept `repeats` times and each shape keeps its fastest time, so a slow spell of
    the machine (a VM drifts 1.5-2x within minutes) hits every shape alike instead of one shape's
    samples; the table is then made monotone (`monotone`)."""
    sr = SlotRunner(runner, max(slots), context + max(rows))
    for s in range(max(slots)):
        sr.forward([(s, torch.zeros(context, dtype=torch.long))])
    samples: dict[tuple[int, int], list[float]] = {}
    for _ in range(repeats):
        for b in slots:
            for n in rows:
                t0 = now(sr.device)
                sr.forward([(s, torch.zeros(n, dtype=torch.long)) for s in range(b)])
                samples.setdefault((b, n), []).append(now(sr.device) - t0)
                for s in range(b):
                    sr.rollback(s, context)
    return BatchCost(monotone({shape: min(times) for shape, times in samples.items()}))  # noise only adds


def monotone(table: dict[tuple[int, int], float]) -> dict[tuple[int, int], float]:
    """A step with more rows per slot, or more slots, never costs less than a smaller one in the
    table. Timing noise can make a larger shape look cheaper (2 slots x 2 rows under 2 x 1), and
    the schedulers would then draft for free; raising it to the smaller shape's time removes that."""
    out = dict(table)
    slots, rows = sorted({b for b, _ in out}), sorted({r for _, r in out})
    for b in slots:
        for lo, hi in zip(rows, rows[1:], strict=False):
            if (b, lo) in out and (b, hi) in out:
                out[(b, hi)] = max(out[(b, hi)], out[(b, lo)])
    for r in rows:
        for lo, hi in zip(slots, slots[1:], strict=False):
            if (lo, r) in out and (hi, r) in out:
                out[(hi, r)] = max(out[(hi, r)], out[(lo, r)])
    return out


def cached(runner: LeanLlamaRunner, force: bool = False) -> BatchCost:
    """`measure` once per model shape, dtype, machine and library version; reuse it after."""
    key = {
        "kind": "batched",
        "version": TABLE_VERSION,
        "config": {k: v for k, v in runner.config.to_dict().items() if "name" not in k},
        "dtype": str(runner.lm_head.w_t.dtype),
        "packed": runner.packed,
        "device": str(runner.device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": cpu_name(),
    }
    digest = hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = data_dir() / "calibration" / f"batched-{digest}.json"
    if not force:
        try:
            return BatchCost.from_json(json.loads(path.read_text())["cost"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    with OtherLoad() as load:
        cost = measure(runner)
    if not cacheable(load, "the batched step costs", "draftsmith calibrate --force --batch"):
        return cost
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"key": key, "cost": cost.to_json()}, default=str))
        tmp.replace(path)
    except OSError:
        pass
    return cost
