"""Read a saved `draftsmith bench --out FILE.json`: acceptance per position, tau, measured tok/s,
and the per-round costs its records timed (drafting, prefill), per suite and method."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from draftsmith.errors import DraftsmithError
from draftsmith.planning.acceptance import Acceptance, from_cumulative


@dataclass(frozen=True)
class BenchRow:
    """One (suite, method) of a bench: what was accepted, how fast it ran, what a round cost."""

    suite: str
    method: str
    tau: float | None
    cumulative: tuple[float, ...]  # bench's acceptance_by_position: accepted_at / drafted_at
    tok_s: float  # median over repeats, prefill included (as bench reports it)
    rounds: int
    new_tokens: int
    mean_draft: float  # drafted tokens per round
    draft_s_per_round: float  # everything but the verify step and prefill, per round
    verify_s_per_round: float
    prefill_s: float  # over all its records


@dataclass(frozen=True)
class BenchFile:
    path: str
    machine: dict
    rows: tuple[BenchRow, ...]

    @property
    def dtype(self) -> str | None:
        return self.machine.get("dtype")

    def row(self, suite: str, method: str) -> BenchRow | None:
        return next((r for r in self.rows if r.suite == suite and r.method == method), None)

    def acceptance(self, row: BenchRow) -> Acceptance:
        return from_cumulative(
            row.method,
            row.suite,
            row.cumulative,
            row.tau or 1.0,
            f"measured: {self.path}, suite {row.suite}",
            True,
        )

    def speculative_rows(self) -> list[BenchRow]:
        """Rows of draftsmith's own methods that drafted (plain and the other engines' peers excluded)."""
        return [
            r
            for r in self.rows
            if r.method != "plain"
            and not r.method.startswith(("llamacpp-", "vllm-"))
            and r.cumulative
            and r.rounds
        ]


def load(path: str | Path) -> BenchFile:
    """Parse a bench result; a file of another shape is an error naming what is missing."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise DraftsmithError(f"bench result not found: {path}")
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise DraftsmithError(f"cannot read bench result {path}: {e}") from e
    missing = [k for k in ("summaries", "records", "machine") if not isinstance(data, dict) or k not in data]
    if missing:
        raise DraftsmithError(
            f"{path} is not a `draftsmith bench --out` result: missing {', '.join(missing)}"
        )
    rows = []
    for s in data["summaries"]:
        try:
            rows.append(_row(s, data["records"]))
        except (KeyError, TypeError, ValueError) as e:
            raise DraftsmithError(f"{path}: malformed summary {s!r:.120}: {e}") from e
    return BenchFile(str(path), dict(data["machine"]), tuple(rows))


def _row(summary: dict, records: list[dict]) -> BenchRow:
    suite, method = summary["suite"], summary["method"]
    mine = [
        r["stats"]
        for r in records
        if r.get("method") == method and suite in ("all", r.get("suite")) and r.get("stats")
    ]
    totals = {
        k: sum(float(s[k]) for s in mine) for k in ("rounds", "drafted", "prefill_s", "verify_s", "total_s")
    }
    tokens = sum(int(s["new_tokens"]) for s in mine)
    rounds = int(totals["rounds"])
    other = totals["total_s"] - totals["prefill_s"] - totals["verify_s"]
    return BenchRow(
        suite=suite,
        method=method,
        tau=summary.get("tau"),
        cumulative=tuple(float(x) for x in summary.get("acceptance_by_position") or ()),
        tok_s=float(summary["tok_s_median"]),
        rounds=rounds,
        new_tokens=tokens,
        mean_draft=totals["drafted"] / rounds if rounds else 0.0,
        draft_s_per_round=other / rounds if rounds else 0.0,
        verify_s_per_round=totals["verify_s"] / rounds if rounds else 0.0,
        prefill_s=totals["prefill_s"],
    )
