"""The FastAPI routes: OpenAI's chat and text completions, models, health and Prometheus metrics.

Routes validate and tokenize, then hand a `GenerationRequest` to the worker and relay its events,
as server-sent events or as one JSON body. Both paths read the same worker events, so a streamed
and a non-streamed run of the same greedy request return the same text.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from draftsmith.engine.sampling import SamplingParams
from draftsmith.errors import DraftsmithError
from draftsmith.serving.errors import APIError, error_body, install_error_handlers
from draftsmith.serving.prompts import PromptEncoder, PromptTooLongError
from draftsmith.serving.requests import (
    Failed,
    Finished,
    GenerationRequest,
    QueueFullError,
    RequestHandle,
    TextDelta,
    Worker,
    WorkerUnavailableError,
)
from draftsmith.serving.schemas import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    ChatDelta,
    CompletionRequest,
    ModelCard,
    ModelList,
    SamplingRequest,
    TextChoice,
    TextCompletion,
    Usage,
)

DEFAULT_MAX_TOKENS = 256
"""Completion budget when a request names none (the whole context would tie the worker up)."""

DISCONNECT_POLL_S = 0.25
"""How often a non-streamed request checks whether its client is still there."""


class EngineStream(StreamingResponse):
    """Server-sent events that cancel their worker request however the response ends.

    Starlette stops the body iterator when the client disconnects; cancelling in `finally` here
    (not in the iterator) also covers a client that leaves while the request is still queued.
    """

    def __init__(self, content: AsyncIterator[str], handle: RequestHandle) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.handle.cancel()


def _sse(payload: BaseModel | dict) -> str:
    data = (
        payload.model_dump_json()
        if isinstance(payload, BaseModel)
        else json.dumps(payload, ensure_ascii=False)
    )
    return f"data: {data}\n\n"


async def _watch_disconnect(request: Request, handle: RequestHandle) -> None:
    while True:
        await asyncio.sleep(DISCONNECT_POLL_S)
        if await request.is_disconnected():
            handle.cancel()
            return


async def _collect(handle: RequestHandle, request: Request) -> Finished:
    """Wait for a non-streamed request's result; cancel it if the client leaves first."""
    watcher = asyncio.create_task(_watch_disconnect(request, handle))
    try:
        async for event in handle.events():
            if isinstance(event, Finished):
                return event
            if isinstance(event, Failed):
                raise APIError(event.status, event.message, code=event.code, refused=False)
        raise APIError(500, "the worker ended the request without a result", refused=False)
    finally:
        watcher.cancel()
        handle.cancel()


def require_api_key(app: FastAPI, api_key: str) -> None:
    """Every /v1 route and /metrics answer 401 unless the request carries `Authorization: Bearer
    KEY` (what the OpenAI client sends); /health stays open for load balancers, as in vLLM."""
    expected = f"Bearer {api_key}".encode()

    @app.middleware("http")
    async def _check_key(request: Request, call_next):
        path = request.url.path
        if path.startswith("/v1/") or path == "/metrics":
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                body = error_body(401, "Incorrect or missing API key", code="invalid_api_key")
                return JSONResponse(body, status_code=401)
        return await call_next(request)


def create_app(
    worker: Worker,
    encoder: PromptEncoder,
    model_name: str,
    default_max_tokens: int = DEFAULT_MAX_TOKENS,
    api_key: str | None = None,
) -> FastAPI:
    """The app for one target. Model ids: `model_name` (the first method) and `model_name:METHOD`
    for every served method, so a client picks the decoding method through the `model` field.
    api_key: required as a Bearer token on every API route (None: open)."""
    models = {model_name: worker.methods[0], **{f"{model_name}:{m}": m for m in worker.methods}}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker.start()
        try:
            yield
        finally:
            await run_in_threadpool(worker.stop)

    app = FastAPI(title="draftsmith", description="OpenAI-compatible speculative decoding", lifespan=lifespan)
    install_error_handlers(app, on_invalid=lambda: worker.metrics.count("invalid"))
    if api_key:
        require_api_key(app, api_key)
    app.state.worker = worker

    def method_of(model: str) -> str:
        if model not in models:
            raise APIError(
                404,
                f"The model {model!r} does not exist; served models: {', '.join(models)}",
                param="model",
                code="model_not_found",
            )
        return models[model]

    async def encode(fn: Callable[..., list[int]], arg: object, param: str) -> list[int]:
        try:
            return await run_in_threadpool(fn, arg)
        except PromptTooLongError as e:
            raise APIError(400, str(e), param=param, code="context_length_exceeded") from None
        except DraftsmithError as e:
            raise APIError(400, str(e), param=param, code="invalid_value") from None

    def submit(body: SamplingRequest, ids: list[int], budget: int | None) -> RequestHandle:
        method = method_of(body.model)
        try:
            params = SamplingParams(
                temperature=1.0 if body.temperature is None else body.temperature,
                top_p=1.0 if body.top_p is None else body.top_p,
                top_k=body.top_k or 0,
                seed=body.seed,
            )
        except DraftsmithError as e:
            raise APIError(400, str(e), code="invalid_value") from None
        request = GenerationRequest(
            tuple(ids), method, budget or default_max_tokens, params, body.stop_strings
        )
        try:
            return worker.submit(request)
        except QueueFullError as e:
            worker.metrics.count("rejected")
            raise APIError(
                429, f"server busy: {e}", code="queue_full", headers={"Retry-After": "1"}
            ) from None
        except WorkerUnavailableError as e:
            raise APIError(503, str(e), code="engine_unavailable") from None

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatCompletionRequest, request: Request):
        method_of(body.model)  # an unknown model is a 404 before any tokenizing
        messages = [{"role": m.role, "content": m.text} for m in body.messages]
        ids = await encode(encoder.chat, messages, "messages")
        handle = submit(body, ids, body.token_budget)
        rid = f"chatcmpl-{uuid.uuid4().hex}"
        if body.stream:
            return EngineStream(_chat_events(handle, rid, body.model, body.include_usage), handle)
        done = await _collect(handle, request)
        return ChatCompletion(
            id=rid,
            model=body.model,
            choices=[
                ChatChoice(message=AssistantMessage(content=done.text), finish_reason=done.finish_reason)
            ],
            usage=Usage.of(done.prompt_tokens, done.completion_tokens),
        )

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        method_of(body.model)
        ids = await encode(encoder.completion, body.prompt, "prompt")
        handle = submit(body, ids, body.token_budget)
        rid = f"cmpl-{uuid.uuid4().hex}"
        if body.stream:
            return EngineStream(_text_events(handle, rid, body.model, body.include_usage), handle)
        done = await _collect(handle, request)
        return TextCompletion(
            id=rid,
            model=body.model,
            choices=[TextChoice(text=done.text, finish_reason=done.finish_reason)],
            usage=Usage.of(done.prompt_tokens, done.completion_tokens),
        )

    @app.get("/v1/models")
    async def list_models() -> ModelList:
        return ModelList(data=[ModelCard(id=name, method=m) for name, m in models.items()])

    @app.get("/health")
    async def health() -> JSONResponse:
        alive = worker.is_alive()
        body = {
            "status": "ok" if alive else "unavailable",
            "model": model_name,
            "methods": list(worker.methods),
            "queue_depth": worker.queue_depth,
            "batch_size": worker.batch_size,
            "max_batch": worker.max_batch,
        }
        return JSONResponse(body, status_code=200 if alive else 503)

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        text = worker.metrics.render(worker.queue_depth, worker.batch_size, worker.max_batch)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    return app


async def _chat_events(
    handle: RequestHandle, rid: str, model: str, include_usage: bool
) -> AsyncIterator[str]:
    def chunk(delta: ChatDelta, finish: str | None = None) -> str:
        choice = ChatChunkChoice(delta=delta, finish_reason=finish)
        return _sse(ChatCompletionChunk(id=rid, model=model, choices=[choice]))

    yield chunk(ChatDelta(role="assistant", content=""))
    async for event in handle.events():
        if isinstance(event, TextDelta):
            yield chunk(ChatDelta(content=event.text))
        elif isinstance(event, Finished):
            yield chunk(ChatDelta(), event.finish_reason)
            if include_usage:
                usage = Usage.of(event.prompt_tokens, event.completion_tokens)
                yield _sse(ChatCompletionChunk(id=rid, model=model, choices=[], usage=usage))
        else:
            yield _sse(error_body(event.status, event.message, code=event.code))
    yield "data: [DONE]\n\n"


async def _text_events(
    handle: RequestHandle, rid: str, model: str, include_usage: bool
) -> AsyncIterator[str]:
    def chunk(text: str, finish: str | None = None) -> str:
        return _sse(
            TextCompletion(id=rid, model=model, choices=[TextChoice(text=text, finish_reason=finish)])
        )

    async for event in handle.events():
        if isinstance(event, TextDelta):
            yield chunk(event.text)
        elif isinstance(event, Finished):
            yield chunk("", event.finish_reason)
            if include_usage:
                usage = Usage.of(event.prompt_tokens, event.completion_tokens)
                yield _sse(TextCompletion(id=rid, model=model, choices=[], usage=usage))
        else:
            yield _sse(error_body(event.status, event.message, code=event.code))
    yield "data: [DONE]\n\n"
