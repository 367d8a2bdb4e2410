"""Building the app for a target and running it with uvicorn, blocking or on a background thread."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import uvicorn
from fastapi import FastAPI

from draftsmith.errors import DraftsmithError
from draftsmith.models.target import Target
from draftsmith.serving.app import DEFAULT_MAX_TOKENS, create_app
from draftsmith.serving.batch_worker import AdaptiveWorker, BatchWorker
from draftsmith.serving.prompts import PromptEncoder
from draftsmith.serving.requests import STREAM_INTERVAL_S
from draftsmith.serving.worker import SerialWorker, build_drafters


def build_app(
    target: Target,
    methods: list[str] | tuple[str, ...],
    drafter_options: Mapping[str, Any] | None = None,
    *,
    max_batch: int = 1,
    max_len: int = 2048,
    max_queue: int = 64,
    schedule: str = "history",
    k: int | None = None,
    model_name: str | None = None,
    default_max_tokens: int = DEFAULT_MAX_TOKENS,
    cost=None,
    draft_margin: float | None = None,
    stream_interval: float = STREAM_INTERVAL_S,
    api_key: str | None = None,
    solo_target: Target | None = None,
) -> FastAPI:
    """The server for `target`, decoding with `methods` (the first is the default model's).

    drafter_options: per method, its options dataclass or option values by name (`build_drafter`).
    Drafters are built here, once, so a bad drafter fails at startup, not on a request.
    max_batch 1 decodes one request at a time on any backend; more runs the batched worker (the
    lean runner in float32), whose schedules read the batched cost table (`calibrate --batch`,
    measured here on first use when `cost` is not given). draft_margin: how much faster a batched
    drafting step must be forecast than a plain one (None: the decoder's default). stream_interval:
    text committed within this many seconds of the last streamed delta joins the next one.
    api_key: required as `Authorization: Bearer KEY` on the API routes (None: open).
    solo_target (max_batch > 1): a request that finds the server idle decodes alone on this target's
    single-request path (the same target, or one loaded for it, e.g. bf16 where the batch runs fp32),
    and later arrivals batch meanwhile (`AdaptiveWorker`); None: every request is batched.
    """
    if max_batch < 1:
        raise DraftsmithError(f"--max-batch must be >= 1, got {max_batch}")
    if max_batch == 1 and schedule == "confidence":
        raise DraftsmithError("--schedule confidence schedules a batch: use it with --max-batch > 1")
    drafters = build_drafters(target, list(methods), drafter_options, k)
    if max_batch == 1:
        worker = SerialWorker(
            target, drafters, k=k, max_queue=max_queue, schedule=schedule, stream_interval=stream_interval
        )
    else:
        from draftsmith.engine import batch_cost

        if cost is None and schedule != "fixed":
            cost = batch_cost.cached(target.runner)
        batched = dict(
            max_batch=max_batch,
            max_len=max_len,
            max_queue=max_queue,
            schedule=schedule,
            k=k,
            cost=cost,
            draft_margin=draft_margin,
            stream_interval=stream_interval,
        )
        if solo_target is None:
            worker = BatchWorker(target, drafters, **batched)
        else:
            if solo_target is target:  # the same weights, the solo request's own state
                solo = {m: d.fork() for m, d in drafters.items()}
            else:
                solo = build_drafters(solo_target, list(methods), drafter_options, k)
            worker = AdaptiveWorker(solo_target, solo, target, drafters, **batched)
    prompts = PromptEncoder(target, getattr(worker, "max_context", None))
    return create_app(worker, prompts, model_name or target.name, default_max_tokens, api_key)


def serve(app: FastAPI, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info") -> None:
    """Run until interrupted: HTTP on a background thread, decoding on this (the main) thread, so
    all torch work stays on the thread that loaded the model (see `SerialWorker.run_here`)."""
    worker = app.state.worker
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on"))
    http = threading.Thread(target=_low_priority(server.run), name="draftsmith-http", daemon=True)
    worker._thread = threading.current_thread()  # the lifespan's start() must not spawn a thread

    def interrupt(signum: int, frame: object) -> None:  # SIGTERM stops as cleanly as Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    http.start()
    while not server.started:
        if not http.is_alive():
            raise DraftsmithError(f"the server could not start on {host}:{port} (see the log above)")
        time.sleep(0.05)
    try:
        worker.run_here()
    except KeyboardInterrupt:
        pass
    finally:
        server.should_exit = True
        worker.stop()
        http.join(timeout=15)


def _low_priority(fn: Callable[[], None]) -> Callable[[], None]:
    """Run fn on a thread niced below the decode loop (threads it starts inherit that).

    Each streamed token wakes the HTTP thread; on a machine whose cores all run the decode step's
    thread team, such a wakeup preempts a team thread and the whole parallel region waits for it.
    A lower priority lets the scheduler run the HTTP work in the step's gaps instead."""

    def run() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), HTTP_NICE)
        except (AttributeError, OSError):  # not Linux, or not allowed: run at normal priority
            pass
        fn()

    return run


HTTP_NICE = 10


class BackgroundServer:
    """uvicorn on a daemon thread, for tests and notebooks: `with BackgroundServer(app) as url: ...`.

    port 0 lets the OS pick a free port; `url` is the bound address (http://HOST:PORT).
    """

    def __init__(
        self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 30.0
    ) -> None:
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.host = host
        self.startup_timeout = startup_timeout
        self.thread = threading.Thread(target=self.server.run, name="draftsmith-uvicorn", daemon=True)
        self.url = ""

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.server.should_exit = True
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{self.host}:{port}"
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
