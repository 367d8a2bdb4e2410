"""A verify-cost curve: what one engine step of k tokens costs in an engine, measured at a few k, and
the speedup a method with a given acceptance and drafting cost gets from it. A round verifies 1 + d
tokens (d drafts) plus drafting, and yields tau tokens:

    speedup = (prefill + n T(1)) / (prefill + n / tau (V(1 + d) + draft))

llama.cpp's curve comes from llama-bench (planning/llamacpp.py), vLLM's from its own engine steps
(planning/vllm.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class VerifyCurve:
    """Seconds of one engine step of k tokens, measured at a few k (interpolated between)."""

    tokens: tuple[int, ...]
    seconds: tuple[float, ...]
    source: str
    row_s: float = 0.0  # llama-server: seconds each verified row beyond the first adds to T(k)

    def step_s(self, k: float) -> float:
        ks, ss = self.tokens, self.seconds
        if k <= ks[0]:
            return ss[0]
        for i in range(1, len(ks)):
            if k <= ks[i]:
                return ss[i - 1] + (ss[i] - ss[i - 1]) * (k - ks[i - 1]) / (ks[i] - ks[i - 1])
        return ss[-1] * k / ks[-1]  # past the last point: as many rows again cost as much again

    def verify_s(self, k: float) -> float:
        """Seconds of a verify step of k tokens (llama-server: plus logits and sampling at every row)."""
        return self.step_s(k) + max(k - 1, 0.0) * self.row_s

    def relative(self) -> dict[int, float]:
        return {k: round(s / self.seconds[0], 3) for k, s in zip(self.tokens, self.seconds, strict=True)}


def predict(
    curve: VerifyCurve,
    tau: float,
    drafts: float,
    draft_s: float,
    tokens: float,
    prefill_s: float,
    verify_s: float | None = None,
) -> float:
    """The speedup over the engine's plain decoding of a method with this acceptance and drafting cost
    (`verify_s`: a round's verify time where it is not V(1 + drafts), e.g. a mix of round sizes)."""
    plain = prefill_s + tokens * curve.step_s(1)
    verify = curve.verify_s(1 + drafts) if verify_s is None else verify_s
    spec = prefill_s + tokens / max(tau, 1.0) * (verify + draft_s)
    return plain / spec


def break_even(curve: VerifyCurve, draft_s: float, drafts: int = 3) -> float:
    """The tau a method needs to match plain decoding at d drafts a round and this drafting cost."""
    return (curve.verify_s(1 + drafts) + draft_s) / curve.step_s(1)


@dataclass(frozen=True)
class PeerPrediction:
    """One (suite, method) of an engine's bench peers: the speedup the curve predicts, and the bench's."""

    suite: str
    method: str
    tau: float  # tokens a target step, from the bench
    drafts: float  # drafts a round
    draft_ms: float  # drafting a round
    verify_ms: float  # a round's verify step
    predicted: float
    measured: float | None

    def to_json(self) -> dict:
        return asdict(self)


def curve_lines(curve: VerifyCurve, title: str) -> list[str]:
    """The curve as a markdown table under `title`."""
    return [
        f"## {title} ({curve.source})",
        "",
        "| tokens in the step | " + " | ".join(map(str, curve.tokens)) + " |",
        "|---|" + "---|" * len(curve.tokens),
        "| ms | " + " | ".join(f"{1000 * s:.2f}" for s in curve.seconds) + " |",
        "| relative to 1 | " + " | ".join(f"{v:.2f}" for v in curve.relative().values()) + " |",
        "",
    ]


def prediction_lines(rows: list[PeerPrediction], title: str) -> list[str]:
    """Predicted against measured speedups as a markdown table under `title` (none: no lines)."""
    if not rows:
        return []
    lines = [
        f"## {title}",
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
    return [*lines, ""]


def break_even_line(curve: VerifyCurve) -> str:
    return "Break-even tau at 3 drafts a round (speedup 1.0), by drafting cost: " + ", ".join(
        f"{int(f * 100)}% of a step: {break_even(curve, f * curve.step_s(1)):.2f}"
        for f in (0.0, 0.25, 0.5, 1.0)
    )
