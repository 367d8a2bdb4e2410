"""The batched worker: one background thread runs continuous-batched speculative decoding.

Between steps it admits queued requests into free slots (prefill), drops the ones whose client
left (the slot is free at once), and runs one `BatchDecoder.step` for everything in flight: all
requests share each verify forward. Each request drafts with its own fork of its method's
drafter, so methods can share a batch. A request whose drafter fails ends alone with a 500; a
failure of the shared forward fails the requests in that step and the worker goes on.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Mapping

from draftsmith.engine.batch_decode import DRAFT_MARGIN, BatchDecoder, Running
from draftsmith.engine.drafter import Drafter
from draftsmith.errors import DraftsmithError
from draftsmith.models.target import Target
from draftsmith.serving.metrics import ServerMetrics
from draftsmith.serving.requests import STREAM_INTERVAL_S, Failed, Finished, RequestHandle
from draftsmith.serving.worker import SerialWorker

log = logging.getLogger("draftsmith.serving")


class BatchWorker(SerialWorker):
    """Up to `max_batch` requests decoded together (the `Worker` protocol of worker.SerialWorker)."""

    def __init__(
        self,
        target: Target,
        drafters: Mapping[str, Drafter],
        *,
        max_batch: int = 8,
        max_len: int = 2048,
        max_queue: int = 64,
        schedule: str = "history",
        k: int | None = None,
        cost=None,
        metrics: ServerMetrics | None = None,
        draft_margin: float | None = None,
        stream_interval: float = STREAM_INTERVAL_S,
    ) -> None:
        # the serial worker knows fixed/history; the batched decoder checks its own schedules
        super().__init__(
            target, drafters, max_queue=max_queue, k=k, metrics=metrics, stream_interval=stream_interval
        )
        if max_batch < 1:
            raise DraftsmithError(f"max-batch must be >= 1, got {max_batch}")
        self.schedule = schedule
        self.max_batch = max_batch
        margin = DRAFT_MARGIN if draft_margin is None else draft_margin
        self.decoder = BatchDecoder(target.runner, max_batch, max_len, schedule, cost, margin)
        self.max_context = self.decoder.capacity
        self._handles: dict[int, RequestHandle] = {}
        self._streamed: dict[int, list[str]] = {}  # per slot: the text deltas sent so far

    @property
    def batch_size(self) -> int:
        return len(self._handles)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._admit(block=not self._handles)
            self._drop_cancelled()
            self._step()
        self._shut_batch()

    def _step(self) -> None:
        """One batched step for every request in flight (none: nothing to do)."""
        if not self._handles:
            return
        try:
            done = self.decoder.step()
        except Exception as e:  # the shared forward failed: fail this step's requests, go on
            log.exception("a batched step failed")
            for slot in list(self._handles):
                self._end(slot, Failed(f"the worker failed on this step: {type(e).__name__}: {e}", 500))
            return
        for run in done:
            self._finish(run)

    def _shut_batch(self) -> None:
        for slot in list(self._handles):
            self._end(slot, Failed("the server is shutting down", 503, "engine_unavailable"))

    def _admit(self, block: bool) -> None:
        while self.decoder.free_slots:
            try:
                handle = self._queue.get(timeout=0.1) if block else self._queue.get_nowait()
            except queue.Empty:
                return
            block = False
            if handle.cancelled:
                self.metrics.count("cancelled")
                handle.emit(Failed("cancelled by the client", 499, "cancelled"))
                continue
            self._start(handle)

    def _start(self, handle: RequestHandle) -> None:
        req = handle.request
        self.metrics.started(len(req.prompt_ids), time.perf_counter() - handle.submitted_at)
        on_tokens, streamed = self._streaming(handle, cancellable=False)  # cancelled between steps
        try:
            run = self.decoder.add(
                list(req.prompt_ids),
                self.drafters[req.method].fork(),
                self.target.stop_rule(req.max_tokens, req.stop),
                req.params,
                self.k,
                on_tokens,
            )
        except Exception as e:
            handle.emit(self._failed(req, e))
            return
        self._handles[run.slot] = handle
        self._streamed[run.slot] = streamed

    def _drop_cancelled(self) -> None:
        for slot, handle in list(self._handles.items()):
            if handle.cancelled:
                self.metrics.count("cancelled")
                self._end(slot, Failed("cancelled by the client", 499, "cancelled"))

    def _end(self, slot: int, event: Failed | Finished) -> None:
        self.decoder.remove(slot)
        self._streamed.pop(slot, None)
        handle = self._handles.pop(slot, None)
        if handle is not None:
            handle.emit(event)

    def _finish(self, run: Running) -> None:
        handle = self._handles[run.slot]
        if run.error is not None:
            self._end(run.slot, self._failed(handle.request, run.error))
            return
        finish = run.progress.finish or "length"
        streamed = self._streamed[run.slot]
        self._end(run.slot, self._finished(handle, run.progress.new, finish, run.stats, streamed))


class _SoloPath(SerialWorker):
    """The single-request path inside an AdaptiveWorker: its token callback also runs the batch's
    work between the lone request's rounds (one thread, one OpenMP team)."""

    def __init__(self, *args, between_rounds: Callable[[], None], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.between_rounds = between_rounds

    def _streaming(self, handle: RequestHandle, cancellable: bool):
        on_tokens, streamed = super()._streaming(handle, cancellable)

        def tick(tokens: list[int]) -> None:
            on_tokens(tokens)
            self.between_rounds()

        return tick, streamed


class AdaptiveWorker(BatchWorker):
    """The serving default: a request that finds the server idle decodes on the single-request path
    (`solo_target`, e.g. bf16 fixed-shape steps on a CPU: a lone user's fastest), and requests that
    arrive while others run join the continuous batch (the batched path, float32 on a CPU), whose
    steps run between the lone request's rounds until it ends. Every request's output is its own
    path's plain decoding, whichever path it took."""

    def __init__(
        self,
        solo_target: Target,
        solo_drafters: Mapping[str, Drafter],
        target: Target,
        drafters: Mapping[str, Drafter],
        **kwargs,
    ) -> None:
        super().__init__(target, drafters, **kwargs)
        schedule = "history" if self.schedule == "confidence" else self.schedule  # a batch's schedule
        self.solo = _SoloPath(
            solo_target,
            solo_drafters,
            k=self.k,
            metrics=self.metrics,
            schedule=schedule,
            stream_interval=self.stream_interval,
            between_rounds=self._between_rounds,
        )
        self.solo._stopping = self._stopping  # one stop for both paths
        self.paths = {"solo": 0, "batch": 0}  # requests each path started

    @property
    def batch_size(self) -> int:
        return len(self._handles) + int(self._current is not None)

    def _run(self) -> None:
        while not self._stopping.is_set():
            if self._handles:  # others are running: newcomers join the batch
                self._admit(block=False)
                self._drop_cancelled()
                self._step()
                continue
            try:
                handle = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            self._current = handle
            self.paths["solo"] += 1
            try:
                self.solo._serve(handle)
            except Exception:  # a bug in the bookkeeping itself: report it, keep serving
                log.exception("request %s failed outside the decode loop", handle.request.request_id)
                handle.emit(Failed("internal error", 500, "internal_error"))
            finally:
                self._current = None
        self._shut_batch()

    def _start(self, handle: RequestHandle) -> None:
        self.paths["batch"] += 1
        super()._start(handle)

    def _between_rounds(self) -> None:
        if self._stopping.is_set():
            return
        self._admit(block=False)
        self._drop_cancelled()
        self._step()
