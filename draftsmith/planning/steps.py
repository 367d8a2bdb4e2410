"""Step-time models the planner can run on: the roofline of a hardware preset, or this machine's
calibrated step-cost table (`plan --measure`). Both answer the same three questions: how long a
target step of n tokens per sequence takes, how long a plain decode step takes, and how long a
drafter takes to propose k tokens."""

from __future__ import annotations

from dataclasses import dataclass, field

from draftsmith.planning import cost
from draftsmith.planning.hardware import Hardware
from draftsmith.planning.methods import DrafterCost
from draftsmith.planning.model_spec import ModelSpec
from draftsmith.planning.predict import step_seconds


@dataclass(frozen=True)
class RooflineSteps:
    """Roofline steps on a hardware preset at a context length and concurrency."""

    hw: Hardware
    spec: ModelSpec
    context: float  # mean tokens in the KV cache while the answer is written
    batch: int
    kv_bits: float = 16
    how: str = "roofline: max((weights + B x KV) / bandwidth, 2 x active params x B x n / FLOP/s)"

    @property
    def kv_per_seq(self) -> float:
        return self.spec.kv_bytes_per_token(self.kv_bits) * self.context

    def target(self, n: int) -> float:
        s = self.spec
        return cost.step_time(
            s.read_bytes, self.kv_per_seq, self.batch, n, s.active_params, self.hw.bandwidth, self.hw.flops
        )

    def draft(self, d: DrafterCost, k: int) -> float:
        return d.round_time(k, self.hw, self.batch, self.context)


@dataclass(frozen=True)
class MeasuredSteps:
    """This machine's calibrated step costs (seconds per n-token step), the fixed step shape the
    engine runs, and its per-round work beyond the forward pass (timed on a short plain decode).
    Drafting time: measured per round when a bench gives it, else the 1-token step scaled by the
    bytes the drafter reads over the bytes the target reads."""

    spec: ModelSpec
    table: dict[int, float]
    fixed_rows: int = 0
    overhead_s: float = 0.0
    draft_s: dict[str, float] = field(default_factory=dict)  # method -> seconds per round (bench)
    draft_tokens: dict[str, float] = field(default_factory=dict)  # method -> drafts per round (bench)
    how: str = "measured: calibrated step table of this machine + engine overhead per round"

    def target(self, n: int) -> float:
        return step_seconds(self.table, n, self.fixed_rows) + self.overhead_s

    def draft(self, d: DrafterCost, k: int) -> float:
        if k <= 0:
            return 0.0
        if d.method in self.draft_s:
            measured = self.draft_s[d.method]
            per_token = measured / max(self.draft_tokens.get(d.method, 1.0), 1e-9)
            return measured if d.parallel or d.read_bytes == 0 else per_token * k
        one = step_seconds(self.table, 1, self.fixed_rows) * d.read_bytes / self.spec.read_bytes
        return one if d.parallel else k * one
