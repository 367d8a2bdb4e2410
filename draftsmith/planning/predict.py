"""Predict measured tok/s from a machine's step-cost table, and set predictions against a bench.

This is the check behind `plan --measure --bench FILE`: acceptance (tau, mean draft length) and
drafting time come from the bench, the verify step from the calibrated table of this machine; if
the cost model is right the prediction lands near the measured tok/s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from draftsmith.planning.bench_file import BenchFile


def step_seconds(cost: dict[int, float], tokens: float, fixed_rows: int = 0) -> float:
    """Seconds of one step of `tokens` tokens from the calibrated table: every step of up to
    fixed_rows tokens runs as that one shape (its cost); otherwise the table, linearly interpolated
    between whole sizes (a mean draft length is fractional) and extended along its last slope."""
    if not cost:
        raise ValueError("empty step-cost table")
    if tokens < 1:
        raise ValueError(f"a step verifies at least 1 token, got {tokens}")
    if fixed_rows and tokens <= fixed_rows and fixed_rows in cost:
        return cost[fixed_rows]
    sizes = sorted(cost)
    lo = max((n for n in sizes if n <= tokens), default=sizes[0])
    hi = min((n for n in sizes if n >= tokens), default=sizes[-1])
    if lo == hi:
        if tokens <= sizes[-1] or len(sizes) < 2:
            return cost[lo]
        a, b = sizes[-2], sizes[-1]  # past the table: extend its last slope
        return cost[b] + (tokens - b) * (cost[b] - cost[a]) / (b - a)
    return cost[lo] + (tokens - lo) * (cost[hi] - cost[lo]) / (hi - lo)


def predict_tok_s(
    cost: dict[int, float],
    tau: float,
    mean_draft: float,
    draft_s_per_round: float,
    fixed_rows: int = 0,
    overhead_s: float = 0.0,
    prefill_s_per_token: float = 0.0,
) -> float:
    """tok/s = 1 / ((drafting seconds per round + step(mean draft + 1) + engine overhead per round)
    / tau + prefill seconds per token)."""
    if tau <= 0:
        raise ValueError(f"tau must be positive, got {tau}")
    per_round = draft_s_per_round + step_seconds(cost, mean_draft + 1, fixed_rows) + overhead_s
    return 1.0 / (per_round / tau + prefill_s_per_token)


@dataclass(frozen=True)
class Comparison:
    suite: str
    method: str
    tau: float
    mean_draft: float
    draft_ms: float
    step_ms: float
    predicted: float
    measured: float

    @property
    def error(self) -> float:
        """predicted / measured - 1."""
        return self.predicted / self.measured - 1 if self.measured else float("inf")

    def to_json(self) -> dict:
        return {**asdict(self), "error": round(self.error, 4)}


def compare(
    bench: BenchFile,
    cost: dict[int, float],
    fixed_rows: int = 0,
    overhead_s: float = 0.0,
    methods: list[str] | None = None,
) -> list[Comparison]:
    """Predicted against measured tok/s for every (suite, method) the bench timed with draftsmith's
    engine (HF peers have no per-round stats and are skipped, llama.cpp peers are `plan --engine
    llamacpp`'s). Prefill per token is taken from the
    bench's plain runs: the same prompts, so the same prefill seconds, spread over this method's tokens
    (the planner does not predict prefill)."""
    out = []
    for row in bench.rows:
        if not row.rounds or row.method.startswith("llamacpp-") or (methods and row.method not in methods):
            continue
        plain = bench.row(row.suite, "plain")
        prefill = (plain.prefill_s if plain else row.prefill_s) / row.new_tokens if row.new_tokens else 0.0
        tau = row.tau if row.tau is not None else 1.0
        step = step_seconds(cost, row.mean_draft + 1, fixed_rows)
        predicted = predict_tok_s(
            cost, tau, row.mean_draft, row.draft_s_per_round, fixed_rows, overhead_s, prefill
        )
        out.append(
            Comparison(
                row.suite,
                row.method,
                tau,
                round(row.mean_draft, 3),
                round(1000 * row.draft_s_per_round, 3),
                round(1000 * (step + overhead_s), 3),
                round(predicted, 2),
                row.tok_s,
            )
        )
    return out


def comparison_table(rows: list[Comparison], tolerance: float = 0.20) -> str:
    """Markdown: predicted against measured tok/s, the error, and whether it is within tolerance."""
    lines = [
        "| suite | method | tau | drafts/round | draft ms/round | step ms | predicted tok/s | measured tok/s "
        f"| error | within {tolerance:.0%} |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in rows:
        ok = "yes" if abs(c.error) <= tolerance else "NO"
        lines.append(
            f"| {c.suite} | {c.method} | {c.tau:.3f} | {c.mean_draft:.2f} | {c.draft_ms:.2f} "
            f"| {c.step_ms:.1f} | {c.predicted:.1f} | {c.measured:.1f} | {c.error:+.1%} | {ok} |"
        )
    return "\n".join(lines)
