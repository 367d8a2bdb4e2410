"""The contract between the HTTP layer and whatever decodes requests.

The HTTP layer only submits a `GenerationRequest`, reads the handle's events (text deltas, then
one terminal event) and cancels the handle when its client goes away. Today's worker
(`worker.SerialWorker`) decodes one request at a time; a batched worker that honours the same
`Worker` protocol can replace it without touching the routes.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from draftsmith.engine.sampling import SamplingParams
from draftsmith.serving.metrics import ServerMetrics

_ids = itertools.count(1)


@dataclass(frozen=True)
class GenerationRequest:
    """One request as the worker sees it: token ids in, a budget, sampling settings, stop strings."""

    prompt_ids: tuple[int, ...]
    method: str
    max_tokens: int
    params: SamplingParams = field(default_factory=SamplingParams)
    stop: tuple[str, ...] = ()
    request_id: str = field(default_factory=lambda: f"req-{next(_ids)}")


@dataclass(frozen=True)
class TextDelta:
    """New text the target committed (already verified: never retracted)."""

    text: str


@dataclass(frozen=True)
class Finished:
    """The request ended normally. `text` is the whole completion (what the deltas add up to)."""

    text: str
    finish_reason: str  # OpenAI's: "stop" (EOS or a stop string) or "length" (budget or context)
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Failed:
    """The request ended without a completion; `status` is the HTTP status it maps to."""

    message: str
    status: int = 500
    code: str | None = None


Event = TextDelta | Finished | Failed


class QueueFullError(Exception):
    """The worker's queue is full: the client should retry later (HTTP 429)."""


class WorkerUnavailableError(Exception):
    """The worker is not running (stopped, or its worker died): HTTP 503."""


STREAM_INTERVAL_S = 0.02
"""Text committed within this long of the last delta handed to the HTTP side waits for the next
one (or the end): each hand-over wakes the event loop and the client, and on a small CPU those
wakeups compete with the decode step (streamed serving ran ~7% below unstreamed at one user, where
a step takes ~15 ms). Text is held at most one decode step; 0 hands over every step's text."""


class RequestHandle:
    """A submitted request: an async stream of events for the HTTP layer, and `cancel()`.

    Engines run on their own threads and call `emit`; the events are handed to the event loop
    that created the handle, so the routes never block on the worker. Text deltas closer together
    than `stream_interval` seconds are merged (`STREAM_INTERVAL_S`).
    """

    def __init__(
        self,
        request: GenerationRequest,
        loop: asyncio.AbstractEventLoop | None = None,
        stream_interval: float = STREAM_INTERVAL_S,
    ) -> None:
        self.request = request
        self.submitted_at = time.perf_counter()
        self._loop = loop or asyncio.get_running_loop()
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._cancelled = threading.Event()
        self._done = False
        self.stream_interval = stream_interval
        self._held: list[str] = []  # text not handed over yet (worker thread only)
        self._handed_at = float("-inf")

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Ask the worker to stop this request at its next step (no-op once it has finished)."""
        self._cancelled.set()

    def emit(self, event: Event) -> None:
        """Called by the worker's thread: deliver an event to the consumer's loop (dropped if that
        loop is gone), merging text deltas that come within `stream_interval` of the last one."""
        if isinstance(event, TextDelta):
            self._held.append(event.text)
            at = time.perf_counter()
            if at - self._handed_at < self.stream_interval:
                return
            event, self._held, self._handed_at = TextDelta("".join(self._held)), [], at
        elif self._held:  # the end: the held text first
            self._deliver(TextDelta("".join(self._held)))
            self._held = []
        self._deliver(event)

    def _deliver(self, event: Event) -> None:
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)
        except RuntimeError:  # the loop closed (server shutting down): nobody is listening
            pass

    async def events(self) -> AsyncIterator[Event]:
        """Text deltas, then exactly one Finished or Failed."""
        while not self._done:
            event = await self._events.get()
            if isinstance(event, Finished | Failed):
                self._done = True
            yield event


class Worker(Protocol):
    """What the server needs from an worker (one request at a time today, batched later)."""

    methods: tuple[str, ...]
    max_batch: int
    metrics: ServerMetrics

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def submit(self, request: GenerationRequest) -> RequestHandle:
        """Queue a request; raises QueueFullError or WorkerUnavailableError."""
        ...

    def is_alive(self) -> bool: ...

    @property
    def queue_depth(self) -> int: ...

    @property
    def batch_size(self) -> int:
        """Requests being decoded right now."""
        ...
