"""Serving commands: serve (an OpenAI-compatible HTTP API) and loadtest (drive one)."""

from __future__ import annotations

import argparse
import os
import sys

import draftsmith.cli.common as common
from draftsmith.errors import DraftsmithError


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the target over an OpenAI-compatible HTTP API until interrupted (uvicorn imports late)."""
    from draftsmith.drafters.registry import METHODS, method_options

    methods = [m.strip() for m in args.method.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS] or ([] if methods else [args.method])
    if unknown:
        raise DraftsmithError(f"unknown method {unknown[0]!r}; choose one of: {', '.join(METHODS)}")
    if args.max_batch is not None and args.max_batch < 1:
        raise DraftsmithError(f"--max-batch must be >= 1, got {args.max_batch}")
    if args.max_len < 2:
        raise DraftsmithError(f"--max-len must be >= 2, got {args.max_len}")
    if args.max_queue < 1:
        raise DraftsmithError(f"--max-queue must be >= 1, got {args.max_queue}")
    if not 0 < args.port < 65536:
        raise DraftsmithError(f"--port must be 1..65535, got {args.port}")
    if not 0 <= args.stream_interval_ms <= 1000:
        raise DraftsmithError(f"--stream-interval-ms must be 0..1000, got {args.stream_interval_ms}")
    if args.draft_margin is not None and not 0 <= args.draft_margin < 10:
        raise DraftsmithError(f"--draft-margin must be in [0, 10), got {args.draft_margin}")
    values = common.drafter_values(args)
    options = {m: method_options(m, values) for m in methods}  # bad drafter flags fail before the load
    api_key = args.api_key or os.environ.get("DRAFTSMITH_API_KEY") or None
    if api_key is None and args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"warning: serving on {args.host} without an API key: anyone who reaches this port can use "
            "it (pass --api-key or set DRAFTSMITH_API_KEY)",
            file=sys.stderr,
        )
    from draftsmith.serving.server import build_app, serve

    target, solo_target, max_batch = _targets(args)
    app = build_app(
        target,
        methods,
        options,
        max_batch=max_batch,
        max_len=args.max_len,
        max_queue=args.max_queue,
        schedule=args.schedule,
        k=args.k,
        draft_margin=args.draft_margin,
        stream_interval=args.stream_interval_ms / 1000,
        api_key=api_key,
        solo_target=solo_target,
    )
    names = ", ".join([target.name, *(f"{target.name}:{m}" for m in methods)])
    print(f"serving models {names} at http://{args.host}:{args.port}/v1", file=sys.stderr)
    serve(app, args.host, args.port)
    return 0


DEFAULT_MAX_BATCH = 8


def _targets(args: argparse.Namespace):
    """(the batch's target, the lone request's target or None, max batch). By default a request that
    finds the server idle decodes on the single-request path in the dtype asked for (bf16 fixed-shape
    steps on a CPU with native bf16: a lone user's fastest) and later arrivals batch in float32 (on a
    CPU the only dtype whose outputs do not depend on their neighbours): two copies of the weights
    where the dtypes differ. A target the batched path cannot run is served one request at a time."""
    from draftsmith.engine.lean_llama import LeanLlamaRunner

    if args.max_batch == 1:
        return common.load_target(args), None, 1
    batch_args = argparse.Namespace(**vars(args))
    common.batched_dtype(batch_args)
    target = common.load_target(batch_args)
    if args.max_batch is None and not isinstance(target.runner, LeanLlamaRunner):
        print(
            f"{target.name}: no batched path for this architecture here; one request at a time",
            file=sys.stderr,
        )
        return (target if batch_args.dtype == args.dtype else common.load_target(args)), None, 1
    max_batch = args.max_batch or DEFAULT_MAX_BATCH
    if args.no_solo:
        return target, None, max_batch
    return target, (target if batch_args.dtype == args.dtype else common.load_target(args)), max_batch


def cmd_loadtest(args: argparse.Namespace) -> int:
    from draftsmith.serving.loadtest import main as loadtest_main

    return loadtest_main(args)


def add_parsers(sub: argparse._SubParsersAction, drafter_options: bool) -> None:
    """serve, loadtest; drafter_options: derive `serve`'s drafter flags (`common.add_drafter_args`)."""
    p = sub.add_parser("serve", help="serve the target over an OpenAI-compatible HTTP API (with /metrics)")
    p.add_argument(
        "--method",
        default="ngram",
        help="decoding method, or several comma-separated: the first is the default model, and each "
        "is served as MODEL:METHOD",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--api-key",
        default=None,
        help="require `Authorization: Bearer KEY` on the API (default: $DRAFTSMITH_API_KEY, else open)",
    )
    p.add_argument(
        "--max-batch",
        type=int,
        default=None,
        help=f"requests decoded together (continuous batching of Llama/Qwen-family targets, float32 on "
        f"a CPU; default {DEFAULT_MAX_BATCH}, or 1 where the target cannot batch); 1 = one request at a "
        "time, any target and dtype",
    )
    p.add_argument(
        "--no-solo",
        action="store_true",
        help="batch every request: by default one that finds the server idle decodes alone on the "
        "single-request path (in --dtype; a second copy of the weights on a CPU) while later ones batch",
    )
    p.add_argument(
        "--max-len", type=int, default=2048, help="batched: tokens per request (prompt + completion)"
    )
    p.add_argument("--max-queue", type=int, default=64, help="waiting requests before the server answers 429")
    p.add_argument(
        "--schedule",
        choices=["fixed", "history", "confidence"],
        default="history",
        help="draft tokens verified per step: the drafter's k (fixed), the length that pays on this "
        "machine's measured step costs given the acceptance so far (history, default), or given "
        "DSpark's confidence head for each request (confidence; --max-batch > 1; other drafters "
        "fall back to history)",
    )
    p.add_argument(
        "--stream-interval-ms",
        type=float,
        default=20.0,
        help="streamed text committed within this many ms of the last chunk joins the next chunk "
        "(fewer wakeups of the HTTP side and the client; text waits at most one decode step); 0 = "
        "a chunk every step",
    )
    p.add_argument(
        "--draft-margin",
        type=float,
        default=None,
        help="batched, 2+ requests: start drafting only when a drafting step is forecast this "
        "fraction faster than a plain one, go on while it is forecast faster at all (default 0.05)",
    )
    common.add_target_args(p)
    common.add_drafter_args(p, drafter_options)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "loadtest", help="drive a running server over HTTP: throughput, per-user speed, latency"
    )
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the server (as printed by `serve`)")
    p.add_argument("--model", default=None, help="model id to request (default: the server's first)")
    p.add_argument("--concurrency", default="1,2,4,8", help="comma-separated numbers of concurrent users")
    p.add_argument(
        "--suite", default="mtbench", help="comma-separated suite names or .jsonl files (prompts cycle)"
    )
    p.add_argument("--requests", type=int, default=16, help="requests per concurrency level")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument(
        "--time-limit",
        type=float,
        default=600,
        help="seconds for the whole run; requests running then are cut",
    )
    p.add_argument("--timeout", type=float, default=300, help="seconds a request may wait for its next chunk")
    p.add_argument("--out", default=None, help="save the results as JSON")
    p.add_argument("--plot", default=None, help="save a PNG of per-user speed against total throughput")
    p.add_argument("--label", default=None, help="this run's curve name (default: the model id)")
    p.add_argument(
        "--api-key",
        default=os.environ.get("DRAFTSMITH_API_KEY"),
        help="the key the server was started with (`serve --api-key`; default: $DRAFTSMITH_API_KEY)",
    )
    p.add_argument(
        "--compare", action="append", default=None, help="another run's --out JSON to plot too (repeatable)"
    )
    p.set_defaults(func=cmd_loadtest)
