"""Deployment commands: export (a trained drafter in an engine's format), llamacpp (the pinned build),
vllm (vLLM's CPU build in its own virtualenv)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import draftsmith.cli.common as common
from draftsmith.errors import DraftsmithError


def cmd_export(args: argparse.Namespace) -> int:
    """Write a trained drafter in a format vLLM / SGLang load; what a format cannot carry is refused."""
    from draftsmith.export import DEFAULT_VERIFIER, variant
    from draftsmith.export.methods import check_format, export_directory, method_of

    method = method_of(args.drafter)
    check_format(method, args.format)  # before the slow model load
    if args.format == "gguf":
        from draftsmith.deploy import llamacpp

        llamacpp.require()
    # (a Namespace built in code may lack these two)
    lookup, cut = getattr(args, "lookup", True), getattr(args, "draft_vocab", None)
    variant.check(Path(args.drafter), method, lookup, cut)  # before the slow model load
    out_path = Path(args.out)
    if (
        out_path.exists()
        and not out_path.is_dir()
        and not (args.format == "gguf" and out_path.suffix == ".gguf")
    ):
        raise DraftsmithError(f"--out {args.out} is a file; give a directory")
    name = args.verifier_name or args.target or DEFAULT_VERIFIER
    target = common.load_target(args)
    gguf_type = getattr(args, "gguf_type", "f16")
    out, notes = export_directory(args.drafter, args.format, args.out, target, name, gguf_type, lookup, cut)
    for note in notes:
        print(f"export: {note}", file=sys.stderr)
    report: dict = {"format": args.format, "notes": notes} if notes else {"format": args.format}
    report |= {"out": str(out), "verifier": name}
    if args.format == "gguf":
        from draftsmith.export import gguf

        tgt = gguf.write_target(target, Path(args.out), getattr(args, "gguf_target_type", "q8_0"))
        command = gguf.server_command(method, tgt, out, directory=Path(args.drafter))
        report |= {"target_gguf": str(tgt), "llama_server": command}
    print(json.dumps(report))
    return 0


def cmd_llamacpp(args: argparse.Namespace) -> int:
    from draftsmith.deploy import llamacpp

    if args.action == "install":
        root = llamacpp.install(force=args.force, archive=args.archive)
        print(f"llama.cpp {llamacpp.VERSION} at {root}")
    else:
        print(llamacpp.require())
    return 0


def cmd_vllm(args: argparse.Namespace) -> int:
    from draftsmith.deploy import vllm

    if args.action == "install":
        root = vllm.install(force=args.force)
        print(f"vLLM {vllm.VERSION} (CPU build) at {root}")
    else:
        print(vllm.require())
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """export, llamacpp, vllm."""
    p = sub.add_parser("export", help="write a trained drafter in a format vLLM, SGLang or llama.cpp loads")
    p.add_argument(
        "--format",
        required=True,
        help="one of the drafter's method's formats (`draftsmith methods` lists them; the drafter "
        "directory names its method), e.g. speculators, zlab, deepspec, sglang, hf, gguf (llama.cpp)",
    )
    p.add_argument("--drafter", required=True, help="a trained drafter directory")
    p.add_argument("--out", required=True, help="output directory (config.json + model.safetensors)")
    p.add_argument(
        "--gguf-type",
        default="f16",
        choices=["f32", "f16", "bf16", "q8_0"],
        help="gguf: the drafter's weight type",
    )
    p.add_argument(
        "--gguf-target-type",
        default="q8_0",
        choices=["f32", "f16", "bf16", "q8_0"],
        help="gguf: the target's weight type, when the target is not a GGUF already",
    )
    p.add_argument(
        "--verifier-name",
        default=None,
        help="verifier name written into the config (default: --target, or the default target's hub id)",
    )
    p.add_argument(
        "--no-lookup",
        dest="lookup",
        action="store_false",
        help="DFlash/DSpark trained with the prompt-lookup input (draftsmith's engine only): export it "
        "without that input, as `--method dspark --no-lookup` drafts here, and print what that costs "
        "in held-out accepted length",
    )
    p.add_argument(
        "--draft-vocab",
        type=int,
        default=None,
        help="DFlash/DSpark: cut the head to the N most frequent answer tokens (FR-Spec; counts stored "
        "with the drafter), for the formats that carry a draft vocabulary (speculators, gguf); 0 = no cut",
    )
    common.add_target_args(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("llamacpp", help="the pinned llama.cpp build (GGUF export, bench peers)")
    p.add_argument("action", choices=["install", "path"], help="install: fetch and build; path: print where")
    p.add_argument("--force", action="store_true", help="install: rebuild even if complete")
    p.add_argument("--archive", default=None, help="install: a local copy of the pinned source archive")
    p.set_defaults(func=cmd_llamacpp)

    p = sub.add_parser("vllm", help="vLLM's CPU build in its own virtualenv (bench peers, export checks)")
    p.add_argument(
        "action", choices=["install", "path"], help="install: create it; path: print the vllm executable"
    )
    p.add_argument("--force", action="store_true", help="install: reinstall even if complete")
    p.set_defaults(func=cmd_vllm)
