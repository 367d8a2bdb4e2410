"""Commands on trained drafters: train, score, grow-vocab, sts (confidence temperatures), runs."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import draftsmith.cli.common as common
from draftsmith.cli.options import add_option_flags, options_from_args, training_options
from draftsmith.errors import DraftsmithError


def cmd_train(args: argparse.Namespace) -> int:
    from draftsmith.drafters.dflash.config import default_target_layers
    from draftsmith.drafters.registry import recipe_for
    from draftsmith.training.cache import OnlineData, TargetCache
    from draftsmith.training.train import TrainConfig, train

    recipe = recipe_for(args.method)
    cfg = TrainConfig(
        method=args.method,
        steps=args.steps,
        batch=args.batch,
        lr=args.lr,
        bf16=args.bf16,
        seed=args.seed,
        eval_every=args.eval_every,
        save_every=args.save_every,
        save_dtype=args.save_dtype,
        schedule=args.schedule,
        decay=args.decay,
        held_out=args.held_out,
        init_from=args.init_from,
        grown_lr=args.grown_lr,
        regrow=tuple(x for x in (args.regrow or "").split(",") if x),
        options=options_from_args(recipe, args),
    )
    if bool(args.cache) == bool(args.answers):  # before the slow model load
        raise DraftsmithError("give exactly one of --cache DIR (precomputed) or --answers FILE (online)")
    from draftsmith.training.train import STATE

    resuming = not args.no_resume and (Path(args.out) / STATE).is_file()  # it has its own weights
    if args.init_from and not resuming and not Path(args.init_from).is_dir():
        raise DraftsmithError(f"--init-from: drafter directory not found: {args.init_from}")
    target = common.load_target(args)
    if args.cache:
        data = TargetCache(args.cache, target)
    else:
        layers = default_target_layers(target.runner.num_layers)
        data = OnlineData(target, args.answers, layers, args.max_len)
    held = TargetCache(args.held_out_cache, target) if args.held_out_cache else None
    if held is not None and list(held.layers) != list(data.layers):
        raise DraftsmithError(f"held-out cache has layers {held.layers}, training data {data.layers}")
    result = train(
        target,
        data,
        cfg,
        args.out,
        resume=not args.no_resume,
        stop_after=args.stop_after,
        held_out_data=held,
        compile_loss=args.compile,
    )
    print(json.dumps(result, indent=1))
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    """Teacher-forced accepted length of a trained drafter on prompt/answer pairs: no decoding, so
    it isolates what the drafter learned from how a machine verifies it."""
    from draftsmith.drafters.dflash.config import default_target_layers
    from draftsmith.drafters.registry import recipe_for
    from draftsmith.training.cache import OnlineData

    recipe = recipe_for(args.method)  # before the slow model load, like the file check
    if not Path(args.answers).is_file():
        raise DraftsmithError(f"answers file not found: {args.answers}")
    target = common.load_target(args)
    model = recipe.load(target, args.drafter)
    layers = recipe.score_layers(model) or default_target_layers(target.runner.num_layers)
    data = OnlineData(target, args.answers, layers, args.max_len, keep_all=args.keep_unlearnable)
    seqs, opts = list(data), recipe.score_options(model, args.anchors)
    taus = {**recipe.evaluate(model, seqs, opts), **recipe.walk(model, seqs, opts)}
    source = args.drafter or "(the method's default drafter)"
    print(json.dumps({"drafter": str(source), "answers": args.answers, "sequences": len(data), **taus}))
    return 0


def cmd_grow_vocab(args: argparse.Namespace) -> int:
    """Add the most frequent answer tokens to a DFlash/DSpark drafter's draft vocabulary."""
    import numpy as np
    import torch

    from draftsmith.drafters.checkpoint import STS_FILE
    from draftsmith.drafters.dflash.checkpoint import load_drafter, save_drafter
    from draftsmith.drafters.dflash.vocab import answer_token_counts, grow_vocab
    from draftsmith.export.common import full_vocab
    from draftsmith.training.train import HELD_OUT_FILE

    src, out = Path(args.drafter), Path(args.out)
    if out.resolve() == src.resolve():
        raise DraftsmithError("--out must differ from --drafter (the source is kept as it is)")
    # bad paths fail before the target loads (seconds, and its progress output)
    if not src.is_dir():  # load_drafter's own check (it also imports foreign formats)
        raise DraftsmithError(f"drafter directory not found: {src}")
    if args.size < 0:
        raise DraftsmithError(f"--size must be >= 0 (0 = the target's whole vocabulary), got {args.size}")
    if args.size and not args.answers:
        raise DraftsmithError("--answers is required to choose which tokens to add (or --size 0 for all)")
    missing = [a for a in args.answers if not Path(a).is_file()]
    if missing:
        raise DraftsmithError(f"--answers: file not found: {', '.join(missing)}")
    target = common.load_target(args)
    model = load_drafter(src, target, torch.float32)
    if args.answers:
        counts = answer_token_counts(args.answers, target)
    else:
        counts = np.zeros(target.runner.vocab_size, dtype=np.int64)
    if not args.size and full_vocab(model):  # nothing to widen: only the answers' counts to add
        if not args.answers:
            raise DraftsmithError(
                "this drafter already drafts over the whole vocabulary; --answers adds token counts"
            )
        grown = model.float()
    else:
        grown = grow_vocab(model, counts, args.size or len(counts))
    if args.answers or model.token_counts is not None:  # what a cut at decoding ranks by (FR-Spec)
        grown.token_counts = counts if model.token_counts is None else model.token_counts + counts
    save_drafter(grown, out, dtype=torch.float16 if args.save_dtype == "float16" else torch.float32)
    for name in (STS_FILE, HELD_OUT_FILE):  # the confidence head is unchanged; the scores as trained
        if (src / name).is_file():
            shutil.copy(src / name, out / name)
    print(json.dumps({"out": str(out), "draft_vocab": [len(model.d2t), len(grown.d2t)]}))
    return 0


def cmd_sts(args: argparse.Namespace) -> int:
    """Fit STS temperatures (and biases): decode held-out prompts, fit on even ones, report ECE on odd ones,
    then store the fit on all of them with the drafter (its confidences use them from then on)."""
    from draftsmith.evaluation.sts import held_out_prompts, run_sts

    if args.limit < 2:
        raise DraftsmithError(f"--limit must be >= 2 (half fit, half report), got {args.limit}")
    rows = held_out_prompts(args.prompts, args.limit)
    options = common.drafter_options(args, args.method)
    target = common.load_target(args)
    report, path = run_sts(target, args.method, options, rows, args)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(
            "| position | rounds | prefix accepted | T | b | mean survival before -> after "
            "| ECE before -> after |"
        )
        print("|---|---|---|---|---|---|---|")
        for r in report["held_out"]:
            print(
                f"| {r['position']} | {r['rounds']} | {r['prefix_accept_rate']:.3f} | {r['temperature']} | "
                f"{r['bias']} | "
                f"{r['mean_survival_before']:.3f} -> {r['mean_survival_after']:.3f} | "
                f"{r['ece_before']:.3f} -> {r['ece_after']:.3f} |"
            )
    print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from draftsmith.evaluation.train_runs import runs_table

    print(runs_table(args.dirs))
    return 0


def _trainable() -> list[str]:
    from draftsmith.drafters.registry import trainable_methods

    return trainable_methods()


def add_parsers(sub: argparse._SubParsersAction, train_options: bool, drafter_options: bool) -> None:
    """train, score, grow-vocab, sts, runs; train_options / drafter_options: derive `train`'s method
    option flags / `sts`'s drafter flags from the methods' dataclasses (`cli/options.py`)."""
    p = sub.add_parser("train", help="train a drafter (any trainable method) on a target cache")
    p.add_argument(
        "--recipe",
        metavar="FILE",
        help="a TOML file of these flags (recipes/*.toml); flags given here override it",
    )
    p.add_argument("--method", choices=_trainable() if train_options else None, default="dspark")
    p.add_argument("--cache", default=None, help="a target cache from `draftsmith data cache`")
    p.add_argument("--answers", default=None, help="or: regenerated answers, target states computed online")
    p.add_argument("--max-len", type=int, default=1024, help="online: longest sequence")
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--save-every", type=int, default=200)
    p.add_argument("--no-resume", action="store_true")
    p.add_argument(
        "--schedule",
        choices=["cosine", "wsd"],
        default="cosine",
        help="learning rate after warmup: cosine decay, or wsd (constant, then linear decay over --decay)",
    )
    p.add_argument("--decay", type=float, default=0.2, help="wsd: fraction of steps spent decaying")
    p.add_argument("--held-out", type=int, default=16, help="sequences scored for held-out tau")
    p.add_argument(
        "--held-out-cache",
        default=None,
        help="a target cache of answers never trained on, for held-out tau (default: the last 16 sequences)",
    )
    p.add_argument(
        "--save-dtype",
        choices=["float32", "float16", "bfloat16"],
        default="float32",
        help="dtype of the saved drafter (float16 halves the size for shipping)",
    )
    p.add_argument("--stop-after", type=int, default=None, help="end this run at that step (resume later)")
    p.add_argument(
        "--init-from",
        default=None,
        metavar="DIR",
        help="start from a trained drafter of this method and target (fine-tune the shipped one on "
        "your own answers, or continue a finished run); the options must match its config.json",
    )
    p.add_argument(
        "--grown-lr",
        type=float,
        default=1.0,
        metavar="X",
        help="with --init-from: the weights this fine-tune adds (e.g. --lookup-input's) learn at X times "
        "--lr; they start as a no-op and grow slowly at a fine-tune's low rate",
    )
    p.add_argument(
        "--regrow",
        default=None,
        metavar="NAMES",
        help="with --init-from: loaded weights (comma-separated name prefixes, e.g. lookup_in,lookup_len) "
        "that also learn at --grown-lr x --lr: continue a fine-tune that grew them at its rate",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the loss step (needs a C++ compiler on CPU; same maths, fused kernels)",
    )
    if train_options:
        group = p.add_argument_group("method options (each method has its own defaults)")
        add_option_flags(group, training_options(), parser=p)
    common.add_target_args(p)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("score", help="teacher-forced accepted length of a drafter on prompt/answer pairs")
    p.add_argument("--method", default="dspark", help="any trainable method (see `draftsmith methods`)")
    p.add_argument("--drafter", default=None, help="a trained drafter directory (default: the shipped one)")
    p.add_argument("--answers", required=True, help="JSONL of prompt/answer rows (`data regenerate` output)")
    p.add_argument("--anchors", type=int, default=32, help="anchored blocks per sequence (fixed seed)")
    p.add_argument("--max-len", type=int, default=768, help="longest sequence")
    p.add_argument(
        "--keep-unlearnable",
        action="store_true",
        help="also score rows with no answer token inside --max-len (each counts as tau 1; "
        "scores documented by older draftsmith versions include them)",
    )
    common.add_target_args(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser(
        "grow-vocab",
        help="add frequent answer tokens to a trained DFlash/DSpark drafter's draft vocabulary (no training)",
    )
    p.add_argument("--drafter", required=True, help="a trained DFlash/DSpark drafter directory")
    p.add_argument(
        "--size",
        type=int,
        required=True,
        help="draft vocabulary size after growing; 0 = the target's whole vocabulary (what the z-lab and "
        "DeepSpec formats carry)",
    )
    p.add_argument(
        "--answers",
        nargs="+",
        default=[],
        help="answers files (.jsonl[.gz] rows with answer_ids or an answer): which tokens to add "
        "(not needed with --size 0); their token counts are stored with the drafter too, where decoding "
        "ranks tokens for a cut head (FR-Spec; a whole-vocabulary drafter with --size 0 only gains those)",
    )
    p.add_argument("--out", required=True, help="directory for the grown drafter")
    p.add_argument("--save-dtype", default="float16", choices=["float16", "float32"])
    common.add_target_args(p)
    p.set_defaults(func=cmd_grow_vocab)

    p = sub.add_parser(
        "sts",
        help="fit DSpark's confidence temperatures (STS) on held-out prompts and store them with the drafter",
    )
    p.add_argument("--method", default="dspark", choices=["dspark"], help="a drafter with a confidence head")
    p.add_argument(
        "--prompts",
        default=None,
        help="held-out prompts (.jsonl[.gz] rows with a 'prompt'; default: 128 held-out prompts of the "
        "default target's training mix, shipped in the package, never trained on)",
    )
    p.add_argument("--limit", type=int, default=48, help="prompts decoded (half fit, half report)")
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--out", default=None, help="where to write sts.json (default: the drafter's directory)")
    p.add_argument(
        "--no-bias",
        action="store_true",
        help="fit temperatures only (the paper's STS); by default a logit bias per position is fitted too",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    common.add_target_args(p)
    common.add_drafter_args(p, drafter_options)
    p.set_defaults(func=cmd_sts)

    p = sub.add_parser("runs", help="compare training runs: differing settings, held-out tau, wall time")
    p.add_argument("dirs", nargs="+", help="training output directories")
    p.set_defaults(func=cmd_runs)
