"""Command line: demo, generate, bench, data, train, build, score, runs, calibrate, plan, methods, suites.

Every user error is a DraftsmithError printed as one line (exit code 2), never a traceback. One
module per command group adds its commands' parsers next to their functions; common.py holds the
flag groups they share, options.py derives flags from the methods' option dataclasses.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from draftsmith.cli import build, data, decode, export, plan, serve, train
from draftsmith.errors import DraftsmithError

DRAFTING = ("generate", "bench", "sts", "serve")
"""The commands with drafter flags: main() derives those (importing every drafter) only for them."""


def _quiet() -> None:
    """Keep library chatter (progress bars of weight loading, deprecation notes) off the user's screen."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def build_parser(train_options: bool = True, drafter_options: bool = True) -> argparse.ArgumentParser:
    """train_options: list the trainable methods and their option flags under `train`; drafter_options:
    the drafter flags of the decoding commands. Both derive flags from every method's option
    dataclass, which imports every drafter (and torch); main() asks for them only where its command
    has them."""
    parser = argparse.ArgumentParser(prog="draftsmith", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    decode.add_parsers(sub, drafter_options)
    data.add_parsers(sub)
    train.add_parsers(sub, train_options, drafter_options)
    build.add_parsers(sub)
    export.add_parsers(sub)
    plan.add_parsers(sub)
    serve.add_parsers(sub, drafter_options)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        from draftsmith.training.recipe_file import expand_recipe

        argv = expand_recipe(argv)
    except DraftsmithError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    command = argv[0] if argv else None
    parser = build_parser(train_options=command == "train", drafter_options=command in DRAFTING)
    args = parser.parse_args(argv)
    _quiet()
    try:
        return args.func(args)
    except DraftsmithError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
