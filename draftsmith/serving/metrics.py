"""Server counters in Prometheus text format, fed by the worker's own per-request statistics.

Acceptance figures pool each method's `GenerationStats` (tau over all verify rounds, acceptance
by draft position), so /metrics reports the same numbers `draftsmith bench` does, live.
"""

from __future__ import annotations

import threading
from collections import Counter

from draftsmith.engine.stats import GenerationStats

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Histogram bounds in seconds (latency, time to first token, queue wait)."""

OUTCOMES = ("ok", "error", "cancelled", "rejected", "invalid")
"""ok: completed; error: failed in the worker; cancelled: client left; rejected: queue full;
invalid: refused before queueing (bad JSON, parameters, model or prompt)."""


class Histogram:
    """A cumulative Prometheus histogram (not thread-safe: ServerMetrics holds the lock)."""

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.count += 1
        self.sum += value
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1

    def lines(self, name: str) -> list[str]:
        out = [f'{name}_bucket{{le="{b:g}"}} {c}' for b, c in zip(self.buckets, self.counts, strict=True)]
        out.append(f'{name}_bucket{{le="+Inf"}} {self.count}')
        out.append(f"{name}_sum {self.sum:.6f}")
        out.append(f"{name}_count {self.count}")
        return out


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class ServerMetrics:
    """Everything /metrics reports; workers and routes update it from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.stats: dict[str, GenerationStats] = {}
        self.latency = Histogram()
        self.first_token = Histogram()
        self.queue_wait = Histogram()

    def count(self, outcome: str) -> None:
        """A request ended with `outcome` (one of OUTCOMES)."""
        with self._lock:
            self.requests[outcome] += 1

    def started(self, prompt_tokens: int, queue_wait_s: float) -> None:
        with self._lock:
            self.prompt_tokens += prompt_tokens
            self.queue_wait.observe(queue_wait_s)

    def tokens(self, n: int, first_token_s: float | None = None) -> None:
        """n completion tokens committed; first_token_s when they are the request's first."""
        with self._lock:
            self.completion_tokens += n
            if first_token_s is not None:
                self.first_token.observe(first_token_s)

    def finished(self, method: str, stats: GenerationStats, latency_s: float) -> None:
        with self._lock:
            self.requests["ok"] += 1
            self.stats.setdefault(method, GenerationStats()).merge(stats)
            self.latency.observe(latency_s)

    def render(self, queue_depth: int, batch_size: int, max_batch: int) -> str:
        """The Prometheus text exposition (format 0.0.4)."""
        with self._lock:
            out: list[str] = []

            def metric(name: str, kind: str, doc: str, samples: list[str]) -> None:
                out.extend([f"# HELP {name} {doc}", f"# TYPE {name} {kind}", *samples])

            metric(
                "draftsmith_requests_total",
                "counter",
                "Requests ended, by outcome.",
                [f'draftsmith_requests_total{{outcome="{o}"}} {self.requests[o]}' for o in OUTCOMES],
            )
            metric(
                "draftsmith_prompt_tokens_total",
                "counter",
                "Prompt tokens of requests that started decoding.",
                [f"draftsmith_prompt_tokens_total {self.prompt_tokens}"],
            )
            metric(
                "draftsmith_completion_tokens_total",
                "counter",
                "Tokens generated (cancelled requests included).",
                [f"draftsmith_completion_tokens_total {self.completion_tokens}"],
            )
            metric(
                "draftsmith_queue_depth",
                "gauge",
                "Requests waiting for the worker.",
                [f"draftsmith_queue_depth {queue_depth}"],
            )
            metric(
                "draftsmith_batch_size",
                "gauge",
                "Requests being decoded right now.",
                [f"draftsmith_batch_size {batch_size}"],
            )
            metric(
                "draftsmith_max_batch_size",
                "gauge",
                "Most requests the worker decodes at once.",
                [f"draftsmith_max_batch_size {max_batch}"],
            )
            per_method = sorted(self.stats.items())
            for name, kind, doc, value in (
                ("verify_rounds_total", "counter", "Target verify rounds.", lambda s: s.rounds),
                ("drafted_tokens_total", "counter", "Draft tokens verified.", lambda s: s.drafted),
                ("accepted_tokens_total", "counter", "Draft tokens accepted.", lambda s: s.accepted),
                ("tau", "gauge", "Tokens per verify round, bonus included (pooled).", lambda s: s.tau),
                (
                    "acceptance_rate",
                    "gauge",
                    "Accepted / drafted tokens (pooled).",
                    lambda s: s.acceptance_rate,
                ),
            ):
                full = f"draftsmith_{name}"
                metric(
                    full,
                    kind,
                    doc,
                    [f'{full}{{method="{_label(m)}"}} {value(s):g}' for m, s in per_method],
                )
            metric(
                "draftsmith_acceptance_by_position",
                "gauge",
                "Share of rounds that drafted position i (1-based) and accepted it (pooled).",
                [
                    f'draftsmith_acceptance_by_position{{method="{_label(m)}",position="{i + 1}"}} {a:g}'
                    for m, s in per_method
                    for i, a in enumerate(s.acceptance_by_position)
                ],
            )
            for name, hist, doc in (
                ("draftsmith_request_latency_seconds", self.latency, "Submit to last token, completed."),
                ("draftsmith_time_to_first_token_seconds", self.first_token, "Submit to first token."),
                ("draftsmith_queue_wait_seconds", self.queue_wait, "Submit to the start of decoding."),
            ):
                metric(name, "histogram", doc, hist.lines(name))
            return "\n".join(out) + "\n"
