"""Per-request statistics, counted the way the field reports them (tau = tokens per target step)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GenerationStats:
    """tau = tokens produced per verify round, bonus included; a round whose accepted block
    contains EOS counts up to the EOS only."""

    new_tokens: int = 0
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    produced: int = 0
    drafted_at: list[int] = field(default_factory=list)  # rounds that drafted position i
    accepted_at: list[int] = field(default_factory=list)  # rounds that accepted position i
    confidence: list[tuple[int, float, bool]] = field(default_factory=list)  # (position, c, accepted)
    prefill_s: float = 0.0
    draft_s: float = 0.0
    verify_s: float = 0.0
    total_s: float = 0.0

    def record_round(self, k: int, n_accepted: int, produced: int) -> None:
        self.rounds += 1
        self.drafted += k
        self.accepted += min(n_accepted, produced)
        self.produced += produced
        while len(self.drafted_at) < k:
            self.drafted_at.append(0)
            self.accepted_at.append(0)
        for i in range(k):
            self.drafted_at[i] += 1
            self.accepted_at[i] += int(i < n_accepted)

    def merge(self, other: GenerationStats) -> None:
        """Pool another request's counts into this one (tau pooled over rounds, not averaged)."""
        for name in ("new_tokens", "rounds", "drafted", "accepted", "produced"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("prefill_s", "draft_s", "verify_s", "total_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.confidence.extend(other.confidence)
        n = max(len(self.drafted_at), len(other.drafted_at))
        for mine, theirs in ((self.drafted_at, other.drafted_at), (self.accepted_at, other.accepted_at)):
            mine.extend([0] * (n - len(mine)))
            for i, v in enumerate(theirs):
                mine[i] += v

    @property
    def tau(self) -> float:
        return self.produced / self.rounds if self.rounds else 0.0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def acceptance_by_position(self) -> list[float]:
        return [a / d if d else 0.0 for a, d in zip(self.accepted_at, self.drafted_at, strict=True)]

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.total_s if self.total_s else 0.0

    def summary(self) -> str:
        line = f"{self.new_tokens} tokens in {self.total_s:.2f}s ({self.tokens_per_s:.1f} tok/s)"
        if self.drafted:
            busy = self.draft_s + self.verify_s or 1.0
            draft_pct, verify_pct = 100 * self.draft_s / busy, 100 * self.verify_s / busy
            line += (
                f", tau {self.tau:.2f} over {self.rounds} rounds, accepted {self.accepted}/{self.drafted}"
                f" drafted, time draft {draft_pct:.0f}% / verify {verify_pct:.0f}%"
            )
        return line

    def to_dict(self) -> dict:
        return {
            "new_tokens": self.new_tokens,
            "rounds": self.rounds,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "tau": round(self.tau, 4),
            "acceptance_rate": round(self.acceptance_rate, 4),
            "acceptance_by_position": [round(x, 4) for x in self.acceptance_by_position],
            "prefill_s": self.prefill_s,
            "draft_s": self.draft_s,
            "verify_s": self.verify_s,
            "total_s": self.total_s,
        }
