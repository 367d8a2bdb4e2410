"""`draftsmith data`: training data, from prompts to target-written answers to a target cache."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import draftsmith.cli.common as common
from draftsmith.errors import DraftsmithError


def cmd_data(args: argparse.Namespace) -> int:
    if args.action == "prompts":
        from draftsmith.training.prompts import main_prompts

        stats = main_prompts(
            args.n,
            args.out,
            seed=args.seed or 0,
            user_jsonl=args.user_jsonl,
            mix=args.mix,
            code_templates=args.code_templates,
        )
        print(json.dumps(stats, indent=1))
        return 0

    if args.action == "dev":
        from draftsmith.evaluation.dev_set import write_dev_prompts

        suites = [s.strip() for s in args.suite.split(",") if s.strip()]
        print(json.dumps(write_dev_prompts(suites, args.skip, args.n, args.out)))
        return 0

    if args.action == "human":
        from draftsmith.training.human_text import human_pairs

        print(json.dumps(human_pairs(args.n, args.out, args.code_share, args.exclude, args.seed or 0)))
        return 0

    if args.action == "throughput":
        from draftsmith.api import load_target
        from draftsmith.evaluation.regen_throughput import sweep

        try:
            batches = [int(x) for x in args.batches.split(",")]
        except ValueError:
            batches = [0]
        dtypes = args.dtypes.split(",")
        if any(b < 1 for b in batches):
            raise DraftsmithError(f"--batches must be positive integers, got {args.batches!r}")
        if args.context < 2 or args.steps < 1:
            raise DraftsmithError("--context must be >= 2 and --steps >= 1")
        print("| dtype | batch | context | step ms | tok/s |\n|---|---|---|---|---|")
        for pt in sweep(
            lambda d: load_target(args.target, d, args.device, 0), dtypes, batches, args.context, args.steps
        ):
            row = (pt.dtype, pt.batch, pt.context, pt.step_ms, pt.tokens_per_s)
            print("| " + " | ".join(map(str, row)) + " |", flush=True)
        return 0

    if args.action == "regenerate":
        from draftsmith.training.regenerate import RegenConfig, local_engine, openai_engine, regenerate

        common.sampling(args)  # validate
        cfg = RegenConfig(
            args.max_new_tokens,
            args.temperature,
            args.top_p,
            args.top_k,
            args.seed or 0,
            args.batch,
            args.max_prompt_tokens,
        )
        if args.engine == "openai":
            if not args.base_url or not args.model:
                raise DraftsmithError("--engine openai needs --base-url and --model")
            engine = openai_engine(args.base_url, args.model, cfg, args.api_key, args.concurrency)
        else:
            if args.batch > 1:  # bf16 batched decoding runs ~3x slower than fp32 on CPU
                common.batched_dtype(args)
            engine = local_engine(common.load_target(args), cfg)
        print(json.dumps(regenerate(args.prompts, args.out, engine, limit=args.limit)))
        return 0
    from draftsmith.drafters.dflash.config import default_target_layers
    from draftsmith.training.cache import build_cache

    target = common.load_target(args)
    layers = (
        default_target_layers(target.runner.num_layers)
        if args.layers == "auto"
        else [int(x) for x in args.layers.split(",")]
    )

    def confirm(size: int, tokens: int, seqs: int) -> bool:
        free = shutil.disk_usage(Path(args.out).resolve().parent).free
        print(
            f"cache: {seqs} sequences, {tokens} tokens, layers {layers}: {size / 2**30:.2f} GiB "
            f"({free / 2**30:.1f} GiB free)",
            file=sys.stderr,
        )
        if size > 0.95 * free:
            raise DraftsmithError("not enough disk for the cache; train online or use fewer sequences")
        return True

    manifest = build_cache(
        target,
        args.answers,
        args.out,
        layers,
        dtype=args.cache_dtype,
        max_len=args.max_len,
        limit=args.limit,
        keep_all=args.keep_unlearnable,
        confirm=confirm,
    )
    dropped = manifest.get("dropped_no_answer", 0)
    print(
        f"cache at {args.out}: {manifest['sequences']} sequences, {manifest['tokens']} tokens"
        + (f" ({dropped} rows dropped: no answer token inside --max-len {args.max_len})" if dropped else "")
    )
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """The `data` command and its subcommands, each with its own options and help (as git's are)."""
    p = sub.add_parser("data", help="build training data: prompts, target-written answers, target cache")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    q = actions.add_parser("prompts", help="an offline prompt mix, deduplicated, split train/held-out")
    q.add_argument("--out", required=True, help="output directory (train.jsonl, held_out.jsonl, manifest)")
    q.add_argument("--n", type=int, default=2000, help="how many prompts")
    q.add_argument("--user-jsonl", default=None, help="your own prompts to include")
    q.add_argument(
        "--mix", default=None, help="category weights, e.g. code=0.4,chat=0.3,math=0.25,instruction=0.05"
    )
    q.add_argument(
        "--code-templates",
        default=None,
        help="code request shapes, default implement,explain,review,tests; 'complete' adds function "
        "completion (humaneval's shape, built from CodeI/O tasks)",
    )
    q.add_argument("--seed", type=int, default=None)

    q = actions.add_parser("dev", help="bench-shaped dev prompts: the suites' next items after the bench's")
    q.add_argument("--out", required=True, help="output directory (one OUT/SUITE.jsonl per suite)")
    q.add_argument("--n", type=int, default=30, help="prompts per suite")
    q.add_argument("--suite", default="humaneval,mtbench,gsm,alpaca", help="suites to draw from")
    q.add_argument("--skip", type=int, default=10, help="items the bench decodes, left out (bench --limit)")

    q = actions.add_parser("human", help="human-written prompt/answer pairs from the offline sources")
    q.add_argument("--out", required=True, help="output JSONL file")
    q.add_argument("--n", type=int, default=2000, help="how many pairs")
    q.add_argument("--code-share", type=float, default=0.5, help="fraction of code pairs (rest: chat)")
    q.add_argument("--exclude", default=None, help="a prompts JSONL whose prompts are left out (held out)")
    q.add_argument("--seed", type=int, default=None)

    q = actions.add_parser("regenerate", help="answers written by the target itself (resumable)")
    q.add_argument("--prompts", required=True, help="prompts JSONL (e.g. DIR/train.jsonl)")
    q.add_argument("--out", required=True, help="output answers JSONL (rerun to resume)")
    q.add_argument("--limit", type=int, default=None, help="at most this many prompts")
    q.add_argument(
        "--engine",
        choices=["local", "openai"],
        default="local",
        help="local: the target here; openai: a server you run (vLLM, SGLang, llama-server)",
    )
    q.add_argument(
        "--batch", type=int, default=32, help="local: sequences in flight (1 = speculative engine)"
    )
    q.add_argument("--max-prompt-tokens", type=int, default=None, help="local: skip longer prompts")
    q.add_argument("--base-url", default=None, help="openai: e.g. http://host:8000/v1")
    q.add_argument("--model", default=None, help="openai: served model name")
    q.add_argument("--api-key", default="EMPTY", help="openai: the server's key")
    q.add_argument("--concurrency", type=int, default=8, help="openai: requests in flight")
    common.add_target_args(q)
    common.add_sampling_args(q, 256)
    q.set_defaults(temperature=0.7, top_p=0.8, top_k=20)

    q = actions.add_parser("cache", help="the target cache: hidden states of its answers, for training")
    q.add_argument("--answers", required=True, help="the regenerated answers JSONL")
    q.add_argument("--out", required=True, help="output directory")
    q.add_argument("--limit", type=int, default=None, help="at most this many answers")
    q.add_argument("--layers", default="auto", help="target layers, e.g. 1,8,14,20,27 (auto: 5 spaced)")
    q.add_argument("--cache-dtype", default="float16", choices=["float16", "float32"])
    q.add_argument("--max-len", type=int, default=1024, help="tokens per sequence (prompt + answer)")
    q.add_argument(
        "--keep-unlearnable",
        action="store_true",
        help="keep rows with no answer token inside --max-len (left out by default: a full target pass "
        "each for nothing to learn)",
    )
    common.add_target_args(q)

    q = actions.add_parser("throughput", help="time regeneration's batch sizes and dtypes on this machine")
    q.add_argument("--batches", default="16,32,64,128,256", help="batch sizes to time")
    q.add_argument("--dtypes", default="float32,bfloat16", help="dtypes to time")
    q.add_argument("--context", type=int, default=384, help="typical context length of a slot")
    q.add_argument("--steps", type=int, default=8, help="timed decode steps per point")
    common.add_target_args(q)
    p.set_defaults(func=cmd_data)
