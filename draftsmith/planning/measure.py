"""`plan --measure`: this machine's step costs, from the runner's calibrated table (cached on disk
after the first `draftsmith calibrate`) plus the engine's per-round work around each step.

The table times bare forward steps; a decode round also turns logits into tokens, rolls the cache
back and keeps statistics. That work is timed now, on a short plain decode, as the decode's time per
round minus a bare one-token step timed at the same moment (so a busy machine inflates both alike).
A bare step much slower now than in the table means the machine is busier than when it was
calibrated; the plan then says its predictions are unreliable.
"""

from __future__ import annotations

from dataclasses import dataclass

from draftsmith.errors import DraftsmithError
from draftsmith.planning.model_spec import from_config
from draftsmith.planning.predict import step_seconds
from draftsmith.planning.steps import MeasuredSteps

PROBE_PROMPT = "Explain in a few sentences why the sky is blue."
BUSY = 1.25  # a bare step this much slower than the table: the machine is busier than at calibration


@dataclass(frozen=True)
class Machine:
    """What --measure found: the loaded target's name and dtype, and its step model."""

    target_name: str
    dtype: str
    steps: MeasuredSteps
    step_now_s: float  # a bare 1-token step timed now (the table's is steps.table)
    shapes: str = ""  # how the engine shapes its steps, in words

    @property
    def busy(self) -> float:
        """How much slower a bare step runs now than in the calibrated table."""
        return self.step_now_s / step_seconds(self.steps.table, 1, self.steps.fixed_rows)

    def notes(self) -> list[str]:
        table = step_seconds(self.steps.table, 1, self.steps.fixed_rows)
        line = (
            f"measured: {self.target_name} in {self.dtype}, "
            f"{self.shapes or f'fixed step shape {self.steps.fixed_rows} rows'}; "
            f"a bare 1-token step takes {1000 * self.step_now_s:.1f} ms now, {1000 * table:.1f} ms in the "
            f"calibrated table; engine work per round {1000 * self.steps.overhead_s:.1f} ms"
        )
        if self.busy > BUSY:
            line += (
                f". WARNING: steps run {self.busy:.1f}x slower now than at calibration (another job?): "
                "predictions mix the two states; rerun on an idle machine"
            )
        return [line]


def measure(
    source: str | None, dtype: str = "auto", fixed_rows: int | str | None = None, probe_tokens: int = 32
) -> Machine:
    """Load the target once, read (or run) its calibration, time a short plain decode and a bare step."""
    from draftsmith.models.target import Target

    target = Target.load(source, dtype=dtype, calibrate=False, fixed_rows=0)
    table = target.runner.calibrate_cached()
    if not table:
        raise DraftsmithError(
            f"backend {type(target.runner).__name__} has no step-cost table; --measure needs a model the "
            "lean runner drives (Llama / Qwen3 families)"
        )
    target.set_fixed_rows(fixed_rows)  # None: what the engine would pick for this dtype and machine
    runner = target.runner
    rows, shapes = int(runner.fixed_rows), ""
    if runner.mixed_shapes:  # each step size runs as its own shape: the table is the engine's own
        table, rows = dict(runner.step_cost), 0
        shapes = f"mixed exact step shapes (up to {runner.mixed_least} tokens as {runner.mixed_least} rows)"
    per_round = decode_round_seconds(target, probe_tokens)
    now = bare_step_seconds(target.runner)
    dt = str(target.model.dtype).replace("torch.", "")
    spec = from_config(target.model.config.to_dict(), name=target.name, source=f"loaded {target.name}")
    spec = spec.with_bits(32.0 if dt == "float32" else 16.0)
    steps = MeasuredSteps(spec, dict(table), rows, max(0.0, per_round - now))
    return Machine(target.name, dt, steps, now, shapes)


def decode_round_seconds(target, probe_tokens: int = 32, runs: int = 2) -> float:
    """Seconds per round of a short plain decode, prefill excluded (the fastest of a few runs)."""
    from draftsmith.api import generate

    per_round = []
    for _ in range(runs):
        s = generate(target, PROBE_PROMPT, "plain", max_new_tokens=probe_tokens).stats
        if s.rounds:
            per_round.append((s.total_s - s.prefill_s) / s.rounds)
    if not per_round:
        raise DraftsmithError("the probe decode produced no tokens; cannot time the engine")
    return min(per_round)


def bare_step_seconds(runner, context: int = 128, repeats: int = 5) -> float:
    """A bare one-token forward step after `context` tokens, as calibration times it (fastest of a few)."""
    import torch

    from draftsmith.engine.runner import now

    runner.reset(context + 8)
    runner.forward(torch.zeros(context, dtype=torch.long, device=runner.device), n_logits=0)
    samples = []
    for _ in range(repeats):
        t0 = now(runner.device)
        runner.forward(torch.zeros(1, dtype=torch.long, device=runner.device), n_logits=1)
        samples.append(now(runner.device) - t0)
        runner.rollback(context)
    return min(samples)
