"""Commands about the machine and the package: plan, calibrate, methods, suites."""

from __future__ import annotations

import argparse

import draftsmith.cli.common as common
from draftsmith.errors import DraftsmithError
from draftsmith.planning.command import add_arguments  # light: no torch


def cmd_plan(args: argparse.Namespace) -> int:
    """Predict whether speculation pays for a machine and model (imports late: --measure loads torch)."""
    from draftsmith.planning.command import run

    return run(args)


def cmd_calibrate(args: argparse.Namespace) -> int:
    import torch

    from draftsmith.models.loading import cpu_has_bf16
    from draftsmith.models.target import Target

    if args.matmul:
        from draftsmith.evaluation.matmul_bench import markdown, matmul_table
        from draftsmith.models.loading import load_model_and_tokenizer

        model, _, _ = load_model_and_tokenizer(args.target, dtype="float32", device="cpu")
        print("ms per matmul, median of 30: x @ W[in,out] / F.linear(x, W[out,in])")
        print(markdown(matmul_table(model.config)))
        return 0
    from draftsmith.engine.lean_llama import LeanLlamaRunner

    if args.batch:  # the table `serve --max-batch N` reads, in the dtype it serves in
        common.batched_dtype(args)
    target = Target.load(args.target, dtype=args.dtype, device=args.device, calibrate=False, fixed_rows=0)
    if args.batch:
        if not isinstance(target.runner, LeanLlamaRunner):
            raise DraftsmithError("batched steps need a Llama-family target (the lean runner)")
        from draftsmith.engine import batch_cost

        print("batched step cost (serve --max-batch > 1): every slot holds 256 tokens of context")
        print(batch_cost.cached(target.runner, force=args.force).markdown())
        return 0
    cost = target.runner.calibrate_cached(force=args.force)
    if not cost:
        print(f"backend {type(target.runner).__name__} has no tunable step shapes")
        return 0
    plan = getattr(target.runner, "plan", {})
    if target.device.type == "cpu" and target.model.dtype == torch.float32 and cpu_has_bf16():
        print("note: this CPU has native bf16; `--dtype bfloat16` steps are faster (see docs/BENCHMARKS.md)")
    print("| tokens per step | ms per step | x one-token step | executed as (rows, layout) |")
    print("|---|---|---|---|")
    for n, t in cost.items():
        rows, row_major = plan.get(n, (n, False))
        layout = "[out,in]" if row_major else "[in,out]"
        print(f"| {n} | {1000 * t:.1f} | {t / cost[1]:.2f} | {rows}, {layout} |")
    target.set_fixed_rows(args.fixed_rows)  # "mixed" probes (once per plan) whether the shapes keep the bits
    runner = target.runner
    fixed = runner.fixed_rows
    how = "auto for this dtype" if args.fixed_rows is None else f"--fixed-rows {args.fixed_rows}"
    if fixed and runner.mixed_shapes:
        print(
            f"fixed-shape steps ({how}): mixed; every shape of 2..{fixed} rows gives the same bits here, so "
            f"steps of up to {runner.mixed_least} tokens run as {runner.mixed_least} rows and longer ones in "
            f"their own calibrated shape; drafts of up to {fixed - 1} tokens, where the step table says "
            "they pay"
        )
    elif fixed:
        print(f"fixed-shape steps ({how}): {fixed} rows, drafts of up to {fixed - 1} tokens")
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    from draftsmith.drafters.registry import METHODS
    from draftsmith.evaluation.peers import PEERS

    for name, cls in METHODS.items():
        exports = f" [export: {', '.join(cls.export_formats)}]" if cls.export_formats else ""
        print(f"{name:14s} {cls.description}{exports}")
    for name in PEERS:
        print(f"{name:14s} peer (bench only): Hugging Face transformers generate")
    from draftsmith.evaluation.llamacpp_peers import PEERS as LLAMACPP

    for name in LLAMACPP:
        print(f"{name:14s} peer (bench only): llama-server (the pinned llama.cpp build)")
    return 0


def cmd_suites(args: argparse.Namespace) -> int:
    from draftsmith.evaluation.suites import SUITES, fetch_alpaca

    if args.action == "fetch":
        print(f"AlpacaEval instructions saved to {fetch_alpaca()}")
    else:
        print("\n".join(SUITES))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """plan, calibrate, methods, suites."""
    p = sub.add_parser("plan", help="predict whether speculation pays on a machine and model, and how")
    add_arguments(p)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("calibrate", help="time the target's step shapes on this machine and print the table")
    p.add_argument("--force", action="store_true", help="measure again instead of reusing the cached table")
    p.add_argument(
        "--matmul",
        action="store_true",
        help="time the target's matmul shapes at 1-8 rows (fp32, bf16) instead",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        help="time batched steps instead: slots 1-32 x rows per slot 1-8 (the cost table the "
        "server's schedules read)",
    )
    common.add_target_args(p)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("methods", help="list the registered decoding methods")
    p.set_defaults(func=cmd_methods)

    p = sub.add_parser("suites", help="list evaluation suites, or fetch the one that is not shipped offline")
    p.add_argument("action", choices=["list", "fetch"], nargs="?", default="list")
    p.set_defaults(func=cmd_suites)
