"""Acceptance by draft position per method and task: typical published values, or a saved bench.

Typical values are NOT measurements of the user's model: they come from papers or from this
project's own small benchmark, each with its source, and a plan that uses them says so. A saved
`draftsmith bench --out FILE.json` replaces them with what the user's model accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

from draftsmith.planning import cost

TASKS = ("code", "chat", "math")

_PAPER = "DSpark paper Table 1 (Qwen3-4B target, T=1, 7 drafts); constant rate fitted to its tau"
# tau (accepted length, bonus included) at 7 drafts
_PAPER_TAU = {
    "eagle3": {"math": 5.14, "code": 4.16, "chat": 2.39},
    "dflash": {"math": 5.40, "code": 4.74, "chat": 3.07},
    "dspark": {"math": 6.11, "code": 5.38, "chat": 3.64},
}
_PAPER_K = 7

_NGRAM = (
    "this project's bf16 bench of 2026-11-29 (SmolLM2-135M, greedy, "
    "5 prompts per suite, up to 3 drafts; code = HumanEval, chat = MT-Bench, math = GSM-Symbolic)"
)
# (cumulative acceptance among rounds that drafted that far, tau over all rounds)
_NGRAM_BENCH = {
    "code": ((0.604, 0.45, 0.32), 1.409),
    "chat": ((0.556, 0.375, 0.295), 1.181),
    "math": ((0.595, 0.504, 0.4), 1.665),
}

_MTP = "DeepSeek-V3 report: its own MTP module's second token is accepted 85-90% of the time (1 draft)"
_MTP_RATE = 0.87

_DRAFT_MODEL = (
    "assumption: a same-family draft ~10x smaller accepts at a constant rate of roughly 0.6-0.8 "
    "(Leviathan et al. 2023 report 0.5-0.8 for such pairs); the split by task is a guess"
)
_DRAFT_MODEL_RATE = {"code": 0.8, "math": 0.75, "chat": 0.65}
_DRAFT_MODEL_K = 8


@dataclass(frozen=True)
class Acceptance:
    """Conditional acceptance per draft position (c_i = P(i accepted | all before accepted)), the
    share of rounds that draft at all, where the numbers come from, and whether they were measured."""

    method: str
    task: str
    conditional: tuple[float, ...]
    draft_rate: float
    source: str
    measured: bool
    tau: float | None = None  # the measured or published tau the curve reproduces

    @property
    def k_max(self) -> int:
        """The longest draft the curve covers (nothing is assumed beyond it)."""
        return len(self.conditional)

    def expected(self, k: int) -> float:
        return cost.expected_tokens(self.conditional, k, "conditional", self.draft_rate)

    def to_json(self) -> dict:
        return {
            "method": self.method,
            "task": self.task,
            "conditional": [round(c, 4) for c in self.conditional],
            "draft_rate": round(self.draft_rate, 4),
            "tau": self.tau,
            "measured": self.measured,
            "source": self.source,
        }


def draft_rate(cumulative: list[float] | tuple[float, ...], tau: float) -> float:
    """Share of rounds that drafted: (tau - 1) / sum of the cumulative curve, clipped to [0, 1]
    (1 for drafters that always draft; below 1 for n-gram lookup, which drafts only on a match)."""
    total = sum(cost.survival(cumulative, "cumulative"))
    return 1.0 if total <= 0 else max(0.0, min(1.0, (tau - 1) / total))


def from_cumulative(
    method: str, task: str, cumulative, tau: float, source: str, measured: bool
) -> Acceptance:
    """An Acceptance from a bench-style curve (cumulative among rounds that drafted that far) and tau."""
    return Acceptance(
        method,
        task,
        tuple(cost.conditional_from_cumulative(cumulative)),
        draft_rate(cumulative, tau),
        source,
        measured,
        tau,
    )


def typical(method: str, task: str) -> Acceptance:
    """Typical acceptance for a method on a task, labelled with its source (not measured here)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}")
    if method in _PAPER_TAU:
        tau = _PAPER_TAU[method][task]
        a = cost.fit_constant_rate(tau, _PAPER_K)
        return Acceptance(method, task, (a,) * _PAPER_K, 1.0, _PAPER, False, tau)
    if method == "ngram":
        cumulative, tau = _NGRAM_BENCH[task]
        return from_cumulative(method, task, cumulative, tau, _NGRAM, False)
    if method == "mtp":
        return Acceptance(method, task, (_MTP_RATE,), 1.0, _MTP, False, 1 + _MTP_RATE)
    if method == "draft-model":
        a = _DRAFT_MODEL_RATE[task]
        k = _DRAFT_MODEL_K
        return Acceptance(
            method, task, (a,) * k, 1.0, _DRAFT_MODEL, False, round(cost.leviathan_expected(a, k), 3)
        )
    raise ValueError(f"no typical acceptance for method {method!r}")


def given(method: str, task: str, tau: float, k: int) -> Acceptance:
    """A drafter someone else measured: its accepted length a round (the bonus token included) at k
    drafts, as published. A constant rate fitted to it; the plan labels it as given, not measured here."""
    a = cost.fit_constant_rate(tau, k)
    return Acceptance(method, task, (a,) * k, 1.0, f"given: tau {tau:g} at {k} drafts", False, tau)
