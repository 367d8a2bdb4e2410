"""Today's worker: one background thread that owns the target and decodes one request at a time.

The thread is the only code that touches the target's runner (its KV cache is one sequence) and
the drafters (built once per method; `start` resets them for each request). Requests wait in a
bounded queue; a full queue is refused at once instead of piling up latency. A request that
fails is reported to its own client and the loop goes on; a cancelled one stops at its next
verify round.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from draftsmith.api import TextStream
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.engine.drafter import Drafter
from draftsmith.errors import DraftsmithError
from draftsmith.models.target import Target
from draftsmith.serving.metrics import ServerMetrics
from draftsmith.serving.requests import (
    STREAM_INTERVAL_S,
    Failed,
    Finished,
    GenerationRequest,
    QueueFullError,
    RequestHandle,
    TextDelta,
    WorkerUnavailableError,
)

log = logging.getLogger("draftsmith.serving")

SCHEDULES = ("fixed", "history")
"""fixed: verify the drafter's k tokens every round; history: the worker's cost-aware draft length
(measured step costs and running per-position acceptance, see worker/draft_length.py)."""

FINISH_REASONS = {"eos": "stop", "stop": "stop", "length": "length", "context": "length"}
"""Worker finish reasons -> OpenAI's."""


def build_drafters(
    target: Target, methods: list[str] | tuple[str, ...], options: Mapping[str, Any] | None, k: int | None
) -> dict[str, Drafter]:
    """Each served method's drafter, built once through the registry. options: per method, an
    instance of its Drafter's `options` dataclass, or option values by name (`build_drafter`)."""
    options = options or {}
    drafters = {}
    for m in methods:
        opts = options.get(m)
        if isinstance(opts, Mapping):
            drafters[m] = build_drafter(m, target, k=k, **opts)
        else:
            drafters[m] = build_drafter(m, target, opts, k=k)
    return drafters


class _Cancelled(Exception):
    """Raised inside the decode loop's token callback to abandon a request."""


class SerialWorker:
    """One request at a time on a background thread (max_batch 1), behind the `Worker` protocol."""

    max_batch = 1

    def __init__(
        self,
        target: Target,
        drafters: Mapping[str, Drafter],
        *,
        max_queue: int = 64,
        schedule: str = "history",
        k: int | None = None,
        metrics: ServerMetrics | None = None,
        stream_interval: float = STREAM_INTERVAL_S,
    ) -> None:
        if not drafters:
            raise DraftsmithError("serve at least one method")
        if max_queue < 1:
            raise DraftsmithError(f"max_queue must be >= 1, got {max_queue}")
        if not 0 <= stream_interval <= 1:
            raise DraftsmithError(f"stream interval must be 0..1 s, got {stream_interval}")
        self.stream_interval = stream_interval
        if schedule not in SCHEDULES:
            raise DraftsmithError(f"unknown schedule {schedule!r}; choose one of: {', '.join(SCHEDULES)}")
        self.target = target
        self.drafters = dict(drafters)
        self.methods = tuple(self.drafters)
        self.schedule = schedule
        self.k = k
        self.metrics = metrics or ServerMetrics()
        self._queue: queue.Queue[RequestHandle] = queue.Queue(maxsize=max_queue)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._spawned = False  # True when start() made the thread (else run_here's caller owns it)
        self._current: RequestHandle | None = None

    @classmethod
    def build(
        cls,
        target: Target,
        methods: list[str] | tuple[str, ...],
        drafter_options: Mapping[str, Any] | None = None,
        k: int | None = None,
        **kwargs,
    ) -> SerialWorker:
        """Build each method's drafter once through the registry (options per method, as the CLI's)."""
        return cls(target, build_drafters(target, methods, drafter_options, k), k=k, **kwargs)

    # -- the Worker protocol -------------------------------------------------------------------

    def start(self) -> None:
        """Decode on a thread of its own, unless `run_here` already gave the loop a thread."""
        if self._thread is None:
            self._stopping.clear()
            self._thread = threading.Thread(target=self._run, name="draftsmith-worker", daemon=True)
            self._spawned = True
            self._thread.start()

    def run_here(self) -> None:
        """Run the decode loop on the calling thread until `stop` (what `draftsmith serve` does).

        Torch's OpenMP thread team belongs to the thread that made it: a process whose main thread
        loaded and calibrated the model and whose worker then decodes on a second thread carries two
        teams on the same cores, and decoding ran ~1.5x slower (measured: 19-21 vs 12-14 tok/s for
        the same requests). Decoding on the main thread keeps one team; the HTTP side does no torch
        work and runs on another thread.
        """
        self._stopping.clear()
        self._thread = threading.current_thread()
        self._run()

    def stop(self, timeout: float = 10.0) -> None:
        """Refuse new work, fail the queued requests, stop the running one, join the thread."""
        self._stopping.set()
        current = self._current
        if current is not None:
            current.cancel()
        self._drain("the server is shutting down")
        thread, self._thread = self._thread, None
        if thread is not None and self._spawned and thread is not threading.current_thread():
            thread.join(timeout)  # a loop on a caller's thread (run_here) ends by itself

    def submit(self, request: GenerationRequest) -> RequestHandle:
        if request.method not in self.drafters:
            raise DraftsmithError(
                f"method {request.method!r} is not served (serving: {', '.join(self.methods)})"
            )
        if not self.is_alive():
            raise WorkerUnavailableError("the worker is not running")
        handle = RequestHandle(request, stream_interval=self.stream_interval)
        try:
            self._queue.put_nowait(handle)
        except queue.Full:
            raise QueueFullError(f"the queue is full ({self._queue.maxsize} requests waiting)") from None
        return handle

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stopping.is_set()

    @property
    def queue_depth(self) -> int:
        return self._queue.qsize()

    @property
    def batch_size(self) -> int:
        return int(self._current is not None)

    # -- the worker thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                handle = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            self._current = handle
            try:
                self._serve(handle)
            except Exception:  # a bug in the bookkeeping itself: report it, keep serving
                log.exception("request %s failed outside the decode loop", handle.request.request_id)
                handle.emit(Failed("internal error", 500, "internal_error"))
            finally:
                self._current = None

    def _drain(self, message: str) -> None:
        while True:
            try:
                handle = self._queue.get_nowait()
            except queue.Empty:
                return
            handle.emit(Failed(message, 503, "engine_unavailable"))

    def _serve(self, handle: RequestHandle) -> None:
        req = handle.request
        if handle.cancelled:  # the client left while the request waited
            self.metrics.count("cancelled")
            handle.emit(Failed("cancelled by the client", 499, "cancelled"))
            return
        self.metrics.started(len(req.prompt_ids), time.perf_counter() - handle.submitted_at)
        target = self.target
        on_tokens, streamed = self._streaming(handle, cancellable=True)

        try:
            result = speculative_generate(
                target.runner,
                self.drafters[req.method],
                list(req.prompt_ids),
                target.stop_rule(req.max_tokens, req.stop),
                req.params,
                k=self.k,
                on_tokens=on_tokens,
                adaptive=self.schedule == "history",
            )
        except _Cancelled:
            self.metrics.count("cancelled")
            if self._stopping.is_set():
                handle.emit(Failed("the server is shutting down", 503, "engine_unavailable"))
            else:
                handle.emit(Failed("cancelled by the client", 499, "cancelled"))
            return
        except Exception as e:
            handle.emit(self._failed(req, e))
            return
        handle.emit(self._finished(handle, result.tokens, result.finish_reason, result.stats, streamed))

    def _streaming(
        self, handle: RequestHandle, cancellable: bool
    ) -> tuple[Callable[[list[int]], None], list[str]]:
        """A request's token callback (metrics, text deltas) and the list of texts it has streamed.
        cancellable: the callback aborts the decode loop (raises) once the client has left."""
        streamed: list[str] = []

        def on_text(text: str) -> None:
            streamed.append(text)
            handle.emit(TextDelta(text))

        stream = TextStream(self.target, on_text)
        first = [True]

        def on_tokens(tokens: list[int]) -> None:
            if cancellable and (handle.cancelled or self._stopping.is_set()):
                raise _Cancelled
            ttft = time.perf_counter() - handle.submitted_at if first[0] else None
            first[0] = False
            self.metrics.tokens(len(tokens), ttft)
            stream(tokens)

        return on_tokens, streamed

    def _failed(self, req: GenerationRequest, error: Exception) -> Failed:
        """The event for a request the worker could not finish: bad input it could only see
        itself (e.g. drafter limits) is a 400, anything else a 500; counted either way."""
        self.metrics.count("error")
        if isinstance(error, DraftsmithError):
            return Failed(str(error), 400, "invalid_request")
        log.error("request %s failed: %s: %s", req.request_id, type(error).__name__, error, exc_info=error)
        return Failed(f"the worker failed on this request: {type(error).__name__}: {error}", 500)

    def _finished(
        self, handle: RequestHandle, tokens: list[int], finish: str, stats, streamed: list[str]
    ) -> Finished:
        """Emit the text the stream held back (half a UTF-8 character), count the request, and
        return its terminal event."""
        req = handle.request
        text = self.target.decode(tokens)
        sent = "".join(streamed)
        if not text.startswith(sent):  # cannot happen with prefix-stable tokenizers
            log.warning("request %s: streamed text is not a prefix of the final text", req.request_id)
        elif len(text) > len(sent):
            handle.emit(TextDelta(text[len(sent) :]))
        self.metrics.finished(req.method, stats, time.perf_counter() - handle.submitted_at)
        return Finished(text, FINISH_REASONS.get(finish, "stop"), len(req.prompt_ids), len(tokens))
