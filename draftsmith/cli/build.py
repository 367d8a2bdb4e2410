"""`draftsmith build`: own a drafter in one command (prompts -> answers -> cache -> training -> STS ->
scores -> bench -> exports -> report), resumable after a kill."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def cmd_build(args: argparse.Namespace) -> int:
    from draftsmith.build.pipeline import run_build
    from draftsmith.build.stages import BuildSettings, parse_budget

    settings = BuildSettings(
        prompts=str(Path(args.prompts).resolve()),
        method=args.method,
        target=args.target,
        held_out=str(Path(args.held_out).resolve()) if args.held_out else None,
        init_from=args.init_from,
        steps=args.steps,
        budget_s=parse_budget(args.budget),
        engine=args.engine,
        base_url=args.base_url,
        model=args.model,
        concurrency=args.concurrency,
        max_new_tokens=args.max_new_tokens,
        regen_batch=args.regen_batch,
        anchors=args.anchors,
        top_up=args.top_up,
        bench_prompts=args.bench_prompts,
        bench_tokens=args.bench_tokens,
        seed=args.seed,
        gpu=args.gpu,
        cpu=args.cpu,
        plan_model=args.plan_model,
        bits=args.bits,
    )
    api_key = args.api_key or os.environ.get("DRAFTSMITH_API_KEY")
    print(json.dumps(run_build(settings, Path(args.out).resolve(), api_key, args.device)))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build",
        help="own a drafter in one command: prompts -> answers -> training -> bench -> exports -> report",
        description="Train a drafter for your target on your prompts and tell whether it pays: answers "
        "written by the target, the target cache, training (from the shipped drafter where the target has "
        "one), STS, held-out scores, a bench against plain and n-gram, exports for llama.cpp / vLLM / "
        "SGLang, and DIR/report.md with plots. Rerun the same command to resume after a kill.",
    )
    p.add_argument(
        "--prompts",
        required=True,
        help="your prompts, JSONL (prompt/text/instruction/question; optional id and category)",
    )
    p.add_argument("--out", required=True, help="the build directory (new or empty; rerun to resume)")
    p.add_argument("--method", default="dspark", help="the drafter to train (any trainable method)")
    p.add_argument("--held-out", default=None, help="held-out prompts (default: 15%% of yours, 8-60)")
    p.add_argument(
        "--init-from",
        default=None,
        metavar="DIR",
        help="start from this drafter (default: the one shipped for the target, if any; 'none': scratch)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--steps", type=int, default=None, help="training steps (default 200 fine-tuning, 2000 scratch)"
    )
    g.add_argument(
        "--budget", default=None, help="wall time for the whole build, e.g. 20m, 2h: picks the steps"
    )
    p.add_argument(
        "--engine",
        choices=["local", "openai"],
        default="local",
        help="who writes the answers: the target here, or a server you run (vLLM, SGLang)",
    )
    p.add_argument("--base-url", default=None, help="openai: e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", default=None, help="openai: the served model name")
    p.add_argument("--api-key", default=None, help="openai: the server's key (or $DRAFTSMITH_API_KEY)")
    p.add_argument("--concurrency", type=int, default=8, help="openai: requests in flight")
    p.add_argument("--max-new-tokens", type=int, default=256, help="longest answer the target writes")
    p.add_argument("--regen-batch", type=int, default=32, help="local: answers written together")
    p.add_argument("--anchors", type=int, default=32, help="training blocks per sequence a step")
    p.add_argument(
        "--top-up",
        type=int,
        default=None,
        help="train on at least this many prompts, adding the offline mix (default: 0 when "
        "fine-tuning, 1000 from scratch)",
    )
    p.add_argument(
        "--bench-prompts",
        type=int,
        default=16,
        help="held-out prompts benched, taken in turn from each category",
    )
    p.add_argument("--bench-tokens", type=int, default=96, help="tokens decoded per bench prompt")
    p.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("the verdict for other hardware (the planner, from the measured acceptance)")
    g.add_argument("--gpu", default=None, help="a GPU preset, e.g. 4090, h100-sxm (`draftsmith plan --help`)")
    g.add_argument("--cpu", default=None, help="or a CPU memory preset, e.g. ddr5-4800x2")
    g.add_argument("--plan-model", default=None, help="the model to plan for (default: the target)")
    g.add_argument("--bits", type=float, default=None, help="its bits per weight")
    p.add_argument(
        "--target", default=None, help="model dir, hub id or .gguf (default: SmolLM2-135M-Instruct)"
    )
    p.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    p.set_defaults(func=cmd_build)
