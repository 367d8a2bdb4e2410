"""Decoding commands: generate (one prompt), bench (methods and peers on suites), demo."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import draftsmith.cli.common as common
from draftsmith.errors import DraftsmithError


def cmd_generate(args: argparse.Namespace) -> int:
    from draftsmith.api import generate
    from draftsmith.drafters.registry import METHODS, build_drafter

    if args.method not in METHODS:
        raise DraftsmithError(f"unknown method {args.method!r}; choose one of: {', '.join(METHODS)}")
    if not args.prompt.strip():
        raise DraftsmithError("the prompt is empty")
    params = common.sampling(args)  # validate before the slow model load
    options = common.drafter_options(args, args.method)
    target = common.load_target(args)

    def emit(text: str) -> None:
        print(text, end="", flush=True)

    out = generate(
        target,
        args.prompt,
        build_drafter(args.method, target, options, k=args.k),
        max_new_tokens=args.max_new_tokens,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k,
        seed=params.seed,
        stop=tuple(args.stop),
        chat=not args.no_chat,
        k=args.k,
        on_text=emit if args.stream else None,
    )
    if args.stream:
        print()
    else:
        print(out.text)
    print(f"[{out.method}] {out.stats.summary()}, finish: {out.finish_reason}", file=sys.stderr)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from draftsmith.drafters.registry import base_method, method_options
    from draftsmith.evaluation.bench import (
        calibration_table,
        markdown_table,
        noise_notes,
        round_cost_table,
        run_bench,
        validate_methods,
    )
    from draftsmith.evaluation.suites import load_suite

    methods = validate_methods([m.strip() for m in args.methods.split(",") if m.strip()])
    params = common.sampling(args)
    prompts = {}
    for name in [s.strip() for s in args.suite.split(",") if s.strip()]:
        items = load_suite(name, args.limit)
        prompts[items[0].suite if items else name] = items
    drafter_values = common.drafter_values(args)
    for m in methods:  # bad values, and a variant without its own drafter, fail before the model loads
        if base_method(m):
            method_options(m, drafter_values)
    target = common.load_target(args)

    def save(result, final: bool = True) -> str:
        table = markdown_table(result.summaries)
        calib = calibration_table(result.summaries)
        if calib:
            table += "\n\nConfidence calibration (DSpark):\n\n" + calib
        costs = round_cost_table(result.summaries)
        if costs:
            table += "\n\nWhere a round's time goes (pooled over every round):\n\n" + costs
        if final and (notes := noise_notes(result)):
            table += "\n\nHow far to trust these numbers:\n\n" + "\n".join(f"- {n}" for n in notes)
        if args.out:
            Path(args.out).write_text(json.dumps(result.to_json(), indent=1))
        if args.markdown:
            Path(args.markdown).write_text(table + "\n")
        if not final and (args.out or args.markdown):
            done = result.config["repeats_done"]
            print(f"\nsaved repeat {done} of {args.repeats} (kept if the bench is stopped)", file=sys.stderr)
        return table

    result = run_bench(
        target,
        prompts,
        methods,
        repeats=args.repeats,
        max_new_tokens=args.max_new_tokens,
        params=params,
        k=args.k,
        drafter_options=drafter_values,
        source=args.target,
        checkpoint=lambda partial: save(partial, final=False),
        peer_logs=str(Path(args.out).with_suffix("")) + "-peer-logs" if args.out else None,
    )
    print(save(result))
    if args.out:
        print(f"saved {args.out}", file=sys.stderr)
    return 0


DEMO_SUITES = ("humaneval", "gsm", "mtbench")


def cmd_demo(args: argparse.Namespace) -> int:
    from draftsmith.drafters.checkpoint import shipped_drafter
    from draftsmith.evaluation.bench import markdown_table, noise_notes, run_bench
    from draftsmith.evaluation.suites import load_suite

    print("loading the default target (SmolLM2-135M-Instruct; the first run converts the GGUF, ~20 s)...")
    target = common.load_target(args)
    prompts = {"demo": [load_suite(s, 1)[0] for s in DEMO_SUITES]}
    trained = [m for m in ("dflash", "dspark", "eagle3", "mtp", "medusa") if shipped_drafter(m, target)]
    trained += ["hybrid"] if "dspark" in trained else []  # n-gram lookup + the shipped DSpark
    methods = ["plain", "ngram", *trained] + (["draft-model"] if args.draft_model else [])
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
    for note in noise_notes(result):  # the demo runs one repeat: say what that is worth
        print(f"note: {note}")
    if not args.draft_model:
        print("(draft-model skipped: no same-tokenizer draft model ships offline; pass --draft-model)")
    return 0


def add_parsers(sub: argparse._SubParsersAction, drafter_options: bool) -> None:
    """generate, bench, demo; drafter_options: derive the drafter flags (`common.add_drafter_args`)."""
    p = sub.add_parser("generate", help="answer one prompt with a method and print decoding stats")
    p.add_argument("prompt")
    p.add_argument("--method", default="ngram")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--no-chat", action="store_true", help="do not apply the chat template")
    p.add_argument("--stream", action="store_true", help="print text as it is verified")
    common.add_target_args(p)
    common.add_drafter_args(p, drafter_options)
    common.add_sampling_args(p, 256)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("bench", help="measure methods and peers on evaluation suites")
    p.add_argument(
        "--methods",
        default="plain,ngram,hf-plain,hf-prompt-lookup",
        help="our methods (`draftsmith methods`), and peers on the same prompt tokens: hf-plain, "
        "hf-prompt-lookup (transformers); llamacpp-plain, -ngram, -dflash, -dspark, -eagle3 (llama-server); "
        "vllm-plain, -ngram, -dflash, -dspark, -eagle3 (vLLM's CPU build: `draftsmith vllm install`)",
    )
    p.add_argument(
        "--suite", default="humaneval,mtbench,gsm,alpaca", help="comma-separated suite names or .jsonl files"
    )
    p.add_argument("--limit", type=int, default=10, help="prompts per suite")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=None, help="save all results as JSON")
    p.add_argument("--markdown", default=None, help="save the table as markdown")
    common.add_target_args(p)
    common.add_drafter_args(p, drafter_options)
    common.add_sampling_args(p, 128)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("demo", help="decode bundled prompts with each method and print a table")
    p.add_argument("--max-new-tokens", type=int, default=96)
    p.add_argument("--draft-model", default=None)
    common.add_target_args(p)
    p.set_defaults(func=cmd_demo)
