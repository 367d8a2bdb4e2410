"""The stages of `draftsmith build`, in order: the user's prompts (split, topped up), the target's
answers, the target cache, training (from the shipped drafter where the target has one), STS for a
confidence head, held-out scores, a short bench against plain and n-gram, the exports for the engines
the method runs in, and the report. Each stage is a function of the build's settings and the stages
before it; each one's own outputs resume after a kill (answers row by row, cache shard by shard,
training from its last checkpoint)."""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from draftsmith.build.state import BuildState
from draftsmith.errors import DraftsmithError

MIN_PROMPTS = 16
"""Fewer user prompts than this leave too few to hold out and to train on."""
CACHE_LEN = 1024
"""Tokens per cached sequence (prompt and answer), as the shipped drafters were trained."""
PROBE_STEPS = 3
"""Training steps timed to turn a --budget into a step count (the first is warm-up, not counted)."""
FIXED_REST_S = 90.0
"""What follows training besides decoding (scores, exports, report), in seconds: a rough allowance."""
STS_PROMPTS, STS_TOKENS = 24, 96
DEPLOY_ENGINES = ("llamacpp", "vllm", "sglang")
FORMAT_OF = {
    "GGUF": "gguf",
    "speculators": "speculators",
    "zlab": "zlab",
    "deepspec": "deepspec",
    "sglang (SpecForge layout)": "sglang",
    "HF directory": "hf",
}
"""The `export --format` that writes what each engine's support entry says it loads."""
ENGINE_METHOD = {"distilled": "draft-model"}
"""Methods an engine knows under another name (a distilled drafter is a draft model to them)."""


@dataclass(frozen=True)
class BuildSettings:
    """What a build was asked for; a rerun with other settings is refused (state.BuildState)."""

    prompts: str
    method: str = "dspark"
    target: str | None = None
    held_out: str | None = None
    init_from: str | None = None  # None: the shipped drafter for this target, if any; "none": scratch
    steps: int | None = None
    budget_s: float | None = None
    engine: str = "local"
    base_url: str | None = None
    model: str | None = None
    concurrency: int = 8
    max_new_tokens: int = 256
    regen_batch: int = 32
    anchors: int = 32
    top_up: int | None = None  # train prompts to reach with the offline mix (None: 0 when fine-tuning)
    bench_prompts: int = 16
    bench_tokens: int = 96
    seed: int = 0
    gpu: str | None = None
    cpu: str | None = None
    plan_model: str | None = None
    bits: float | None = None

    def check(self) -> None:
        """Bad values fail here, in one line, before any model loads."""
        from draftsmith.drafters.registry import trainable_methods

        if self.method not in trainable_methods():
            raise DraftsmithError(
                f"--method {self.method}: choose a trainable one: {', '.join(trainable_methods())}"
            )
        if not Path(self.prompts).is_file():
            raise DraftsmithError(f"--prompts: file not found: {self.prompts}")
        if self.held_out and not Path(self.held_out).is_file():
            raise DraftsmithError(f"--held-out: file not found: {self.held_out}")
        if self.init_from not in (None, "none") and not Path(self.init_from).is_dir():
            raise DraftsmithError(f"--init-from: drafter directory not found: {self.init_from}")
        if self.steps is not None and self.budget_s is not None:
            raise DraftsmithError("give --steps or --budget, not both")
        if self.steps is not None and self.steps < 1:
            raise DraftsmithError(f"--steps must be >= 1, got {self.steps}")
        if self.budget_s is not None and self.budget_s < 60:
            raise DraftsmithError(f"--budget must be at least 1 minute, got {self.budget_s:g} s")
        if self.engine == "openai" and not (self.base_url and self.model):
            raise DraftsmithError("--engine openai needs --base-url and --model")
        for name in (
            "max_new_tokens",
            "regen_batch",
            "anchors",
            "bench_prompts",
            "bench_tokens",
            "concurrency",
        ):
            if getattr(self, name) < 1:
                raise DraftsmithError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        if self.gpu and self.cpu:
            raise DraftsmithError("give --gpu or --cpu for the verdict, not both")


def parse_budget(text: str | None) -> float | None:
    """'20m', '2h', '90s' or a number of seconds -> seconds."""
    if text is None:
        return None
    units = {"s": 1, "m": 60, "h": 3600}
    t = text.strip().lower()
    try:
        return float(t[:-1]) * units[t[-1]] if t and t[-1] in units else float(t)
    except ValueError:
        raise DraftsmithError(f"--budget: give a duration like 20m, 2h or 900s, got {text!r}") from None


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    os.replace(tmp, path)


def _user_rows(path: str) -> list[dict]:
    """The user's prompts (validated by the suites loader) with their category where a row has one."""
    from draftsmith.evaluation.suites import load_jsonl

    prompts = load_jsonl(path)
    cats = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(x for x in f if x.strip()):
            row = json.loads(line)
            cats[str(row["id"]) if row.get("id") is not None else f"{Path(path).stem}-{i}"] = row.get(
                "category"
            )
    return [{"id": p.id, "prompt": p.text, "category": str(cats.get(p.id) or "prompts")} for p in prompts]


def stage_prompts(s: BuildSettings, out: Path, fine_tune: bool) -> dict:
    """Held-out prompts (the user's --held-out, else a seeded share of theirs) and training prompts,
    topped up from the offline mix when they are few (by default only when training from scratch:
    a shipped drafter already knows the general mix)."""
    user = _user_rows(s.prompts)
    if s.held_out:
        held = _user_rows(s.held_out)
        seen = {r["prompt"] for r in held}
        train = [r for r in user if r["prompt"] not in seen]
    else:
        if len(user) < MIN_PROMPTS:
            raise DraftsmithError(
                f"{s.prompts} has {len(user)} prompts; give at least {MIN_PROMPTS} (or a --held-out file)"
            )
        rows = list(user)
        random.Random(s.seed).shuffle(rows)
        n_held = max(8, min(60, round(0.15 * len(rows))))
        held, train = rows[:n_held], rows[n_held:]
    if not train:
        raise DraftsmithError("no training prompts left after the held-out ones")
    top_up = s.top_up if s.top_up is not None else (0 if fine_tune else 1000)
    added = 0
    if len(train) < top_up:
        from draftsmith.training.prompts import build_prompt_set

        ps = build_prompt_set(top_up - len(train), seed=s.seed, held_out_frac=0.0)
        known = {r["prompt"] for r in train + held}
        extra = [
            {"id": f"mix-{r['id']}", "prompt": r["prompt"], "category": "offline-mix"}
            for r in ps.train
            if r["prompt"] not in known
        ]
        train, added = train + extra, len(extra)
    _write_jsonl(out / "prompts" / "train.jsonl", train)
    _write_jsonl(out / "prompts" / "held_out.jsonl", held)
    categories = sorted({r["category"] for r in held})
    return {
        "user": len(user),
        "train": len(train),
        "held_out": len(held),
        "top_up": added,
        "categories": categories,
    }


def stage_answers(s: BuildSettings, out: Path, target_fp32, api_key: str | None) -> dict:
    """Greedy answers by the target (what greedy decoding, the bench and engines' default, verifies),
    written in prompt order once complete so a resumed build ends with the same files."""
    from draftsmith.training.jsonl import read_rows
    from draftsmith.training.regenerate import RegenConfig, local_engine, openai_engine, regenerate

    cfg = RegenConfig(s.max_new_tokens, 0.0, 1.0, 0, s.seed, s.regen_batch)
    if s.engine == "openai":
        engine = openai_engine(s.base_url, s.model, cfg, api_key or "EMPTY", s.concurrency)
    else:
        target = target_fp32()
        # prompts too long for the context (or the cache's sequence length) are left out, and counted
        room = min(target.runner.max_context, CACHE_LEN) - s.max_new_tokens
        if room < 1:
            raise DraftsmithError(f"--max-new-tokens {s.max_new_tokens} leaves no room for a prompt")
        engine = local_engine(target, replace(cfg, max_prompt_tokens=room))
    result = {}
    for split in ("held_out", "train"):
        prompts, answers = out / "prompts" / f"{split}.jsonl", out / "answers" / f"{split}.jsonl"
        stats = regenerate(prompts, answers, engine, progress=True)
        order = {r["id"]: i for i, r in enumerate(read_rows(prompts))}
        rows = sorted(read_rows(answers), key=lambda r: order.get(r["id"], len(order)))
        _write_jsonl(answers, rows)
        result[split] = {
            "answers": len(rows),
            "new_tokens": sum(r.get("new_tokens", 0) for r in rows),
            **stats,
        }
    return result


def init_drafter(s: BuildSettings, target) -> Path | None:
    """Where training starts: --init-from, else the drafter shipped for this target, else scratch."""
    from draftsmith.drafters.checkpoint import shipped_drafter

    if s.init_from == "none":
        return None
    if s.init_from:
        return Path(s.init_from)
    return shipped_drafter(s.method, target)


@functools.cache
def _start_model(s: BuildSettings, target):
    """The drafter training starts from, loaded once per build (None: scratch)."""
    from draftsmith.drafters.registry import recipe_for

    init = init_drafter(s, target)
    return None if init is None else recipe_for(s.method).load(target, str(init))


def _layers(s: BuildSettings, target) -> list[int]:
    from draftsmith.drafters.dflash.config import default_target_layers
    from draftsmith.drafters.registry import recipe_for

    start = _start_model(s, target)
    layers = recipe_for(s.method).score_layers(start) if start is not None else None
    return layers or default_target_layers(target.runner.num_layers)


def stage_cache(s: BuildSettings, out: Path, target) -> dict:
    from draftsmith.training.cache import build_cache

    def confirm(size: int, tokens: int, seqs: int) -> bool:
        free = shutil.disk_usage(out.resolve()).free
        if size > 0.95 * free:
            raise DraftsmithError(f"the cache needs {size / 2**30:.1f} GiB, {free / 2**30:.1f} GiB are free")
        return True

    manifest = build_cache(
        target,
        out / "answers" / "train.jsonl",
        out / "cache",
        _layers(s, target),
        max_len=CACHE_LEN,
        confirm=confirm,
        progress=True,
    )
    return {k: manifest[k] for k in ("sequences", "tokens", "layers", "dropped_no_answer") if k in manifest}


def train_config(s: BuildSettings, target, steps: int, held: int):
    """The fine-tune of the shipped drafter (its own layout; a short constant-then-decay schedule) or
    a run from scratch with the method's defaults."""
    from draftsmith.drafters.registry import recipe_for
    from draftsmith.training.train import TrainConfig

    recipe = recipe_for(s.method)
    init, start = init_drafter(s, target), _start_model(s, target)
    opts = recipe.tune_options(start) if start is not None else recipe.options()
    if hasattr(opts, "anchors"):
        opts = type(opts)(**{**asdict(opts), "anchors": s.anchors})
    return TrainConfig(
        method=s.method,
        steps=steps,
        batch=8,
        lr=5e-4 if init else 6e-4,
        seed=s.seed,
        eval_every=max(1, steps // 5),
        save_every=max(1, min(50, steps // 4)),
        save_dtype="float16",
        schedule="wsd" if init else "cosine",
        decay=0.3,
        held_out=held,
        init_from=str(init) if init else None,
        options=opts,
    )


def bench_suites(s: BuildSettings, out: Path) -> dict[str, list]:
    """The held-out prompts the bench decodes: --bench-prompts of them, taken in turn from each
    category so every category is measured."""
    from draftsmith.evaluation.suites import Prompt
    from draftsmith.training.jsonl import read_rows

    by_cat: dict[str, list[dict]] = {}
    for row in read_rows(out / "prompts" / "held_out.jsonl"):
        by_cat.setdefault(row["category"], []).append(row)
    suites: dict[str, list[Prompt]] = {c: [] for c in by_cat}
    for i in range(max(map(len, by_cat.values()), default=0)):
        for cat, rows in by_cat.items():
            if i < len(rows) and sum(map(len, suites.values())) < s.bench_prompts:
                suites[cat].append(Prompt(cat, rows[i]["id"], rows[i]["prompt"]))
    return {c: ps for c, ps in suites.items() if ps}


def decode_speed(target, out: Path, tokens: int = 48) -> float:
    """Plain decoding's tokens per second here (one held-out prompt): what the stages after training
    will decode at, measured rather than guessed."""
    import time

    from draftsmith.drafters.registry import build_drafter
    from draftsmith.engine.decode import speculative_generate
    from draftsmith.engine.sampling import SamplingParams
    from draftsmith.training.jsonl import read_rows

    prompt = next(iter(read_rows(out / "prompts" / "held_out.jsonl")))["prompt"]
    ids = target.encode(prompt, chat=True)
    plain = build_drafter("plain", target, None)
    t0 = time.perf_counter()
    res = speculative_generate(target.runner, plain, ids, target.stop_rule(tokens), SamplingParams())
    return max(len(res.tokens), 1) / (time.perf_counter() - t0)


def rest_seconds(s: BuildSettings, out: Path, fine_tuned: bool, tok_s: float) -> float:
    """What the stages after training will take: their decoding at the measured plain speed (drafters
    decode faster, so this errs long) plus a fixed allowance."""
    benched = sum(map(len, bench_suites(s, out).values()))
    tokens = benched * len(bench_methods(s, fine_tuned)) * 2 * s.bench_tokens
    tokens += STS_PROMPTS * STS_TOKENS if s.method == "dspark" else 0
    return tokens / tok_s + FIXED_REST_S


def choose_steps(s: BuildSettings, state: BuildState, target, data, tok_s=None) -> dict:
    """--steps, or the steps a --budget leaves for training at the step time measured here (a few
    steps timed on this machine, in a scratch directory), after what the later stages will take at
    this machine's decoding speed (`tok_s`, measured when called); kept with the build so a rerun
    repeats it."""
    if state.record.get("steps"):
        return state.record["steps"]
    init = init_drafter(s, target)
    if s.steps or not s.budget_s:
        chosen = {"steps": s.steps or (200 if init else 2000), "from": "--steps" if s.steps else "default"}
    else:
        from draftsmith.training.train import train

        probe = state.out / "train-probe"
        shutil.rmtree(probe, ignore_errors=True)
        cfg = train_config(s, target, 1000, 0)
        cfg = replace(cfg, eval_every=10**6, save_every=10**6)
        train(target, data, cfg, probe, resume=False, progress=False, stop_after=PROBE_STEPS)
        log = [json.loads(x) for x in (probe / "train_log.jsonl").read_text().splitlines()]
        step_s = (log[-1]["seconds"] - log[0]["seconds"]) / max(1, len(log) - 1)
        shutil.rmtree(probe, ignore_errors=True)
        speed = tok_s()
        rest = rest_seconds(s, state.out, init is not None, speed)
        left = s.budget_s - state.elapsed() - rest
        steps = max(10, int(left / (step_s * 1.1)))  # 10%: the held-out evaluations along the way
        chosen = {
            "steps": steps,
            "from": "--budget",
            "step_s": round(step_s, 2),
            "left_s": round(left),
            "rest_s": round(rest),
            "plain_tok_s": round(speed, 1),
        }
        if left <= 0:
            state.note(
                f"the stages before training used {state.elapsed():.0f} s of the {s.budget_s:.0f} s budget: "
                "trained the minimum of 10 steps"
            )
    state.put("steps", chosen)
    return chosen


def stage_train(s: BuildSettings, state: BuildState, target, chosen: dict) -> dict:
    from draftsmith.training.cache import OnlineData, TargetCache
    from draftsmith.training.train import train

    data = TargetCache(state.out / "cache", target)
    held = list(OnlineData(target, state.out / "answers" / "held_out.jsonl", list(data.layers)))
    cfg = train_config(s, target, chosen["steps"], len(held))
    result = train(target, data, cfg, state.out / "drafter", progress=True, held_out_data=held)
    return {
        "steps": result["steps"],
        "init_from": cfg.init_from,
        "seconds": result["seconds"],
        **result["last"],
    }


def stage_sts(s: BuildSettings, out: Path, target_auto) -> dict:
    """Calibrate the confidence head on training prompts (the held-out ones stay unseen)."""
    from types import SimpleNamespace

    from draftsmith.drafters.registry import method_options
    from draftsmith.evaluation.sts import run_sts
    from draftsmith.training.jsonl import read_rows

    prompts = [r["prompt"] for r in read_rows(out / "prompts" / "train.jsonl")][:STS_PROMPTS]
    options = method_options(s.method, {"drafter": str(out / "drafter")})
    args = SimpleNamespace(max_new_tokens=STS_TOKENS, no_bias=False, out=None)
    report, path = run_sts(target_auto(), s.method, options, prompts, args)
    return {"file": str(path), "rounds_fitted": len(prompts)}


def _held_out_by_category(out: Path) -> dict[str, Path]:
    from draftsmith.training.jsonl import read_rows

    groups: dict[str, list[dict]] = {}
    for row in read_rows(out / "answers" / "held_out.jsonl"):
        groups.setdefault(row.get("category") or "prompts", []).append(row)
    paths = {}
    for cat, rows in groups.items():
        paths[cat] = out / "score" / f"held_out-{len(paths)}.jsonl"
        _write_jsonl(paths[cat], rows)
    return paths


def stage_score(s: BuildSettings, out: Path, target) -> dict:
    """Teacher-forced accepted length on the held-out answers, overall and per category, of the new
    drafter and of the one it started from: did training on these prompts pay?"""
    from draftsmith.drafters.registry import recipe_for
    from draftsmith.training.cache import OnlineData

    recipe = recipe_for(s.method)
    drafters = {"yours": out / "drafter"}
    init = init_drafter(s, target)
    if init is not None:
        drafters["start_scores"] = init
    held_out = _held_out_by_category(out)
    data: dict[tuple[int, ...], dict[str, list]] = {}  # the held-out states, per layer set a drafter reads
    result: dict[str, Any] = {"start_from": str(init) if init else None}
    for name, where in drafters.items():
        model = recipe.load(target, str(where))
        layers = tuple(recipe.score_layers(model) or _layers(s, target))
        if layers not in data:
            data[layers] = {cat: list(OnlineData(target, p, list(layers))) for cat, p in held_out.items()}
        seqs = data[layers]
        every = [x for group in seqs.values() for x in group]
        result["sequences"] = len(every)
        opts = recipe.score_options(model, 32)
        scores = {"all": {**recipe.evaluate(model, every, opts), **recipe.walk(model, every, opts)}}
        for cat, group in seqs.items():
            scores[cat] = recipe.evaluate(model, group, opts)
        result[name] = scores
    return result


def bench_methods(s: BuildSettings, fine_tuned: bool) -> list[str]:
    return ["plain", "ngram", s.method] + ([f"{s.method}:start"] if fine_tuned else [])


def stage_bench(s: BuildSettings, out: Path, target_auto, init: Path | None) -> dict:
    """Plain, n-gram, the new drafter (and the one it started from), interleaved, 2 repeats, on the
    held-out prompts by category: the wall-clock answer in this engine."""
    from draftsmith.evaluation.bench import noise_notes, run_bench

    suites = bench_suites(s, out)
    drafters = {s.method: str(out / "drafter")} | ({f"{s.method}:start": str(init)} if init else {})
    result = run_bench(
        target_auto(),
        suites,
        bench_methods(s, init is not None),
        repeats=2,
        max_new_tokens=s.bench_tokens,
        drafter_options={"drafter": drafters},
        progress=True,
    )
    (out / "bench.json").write_text(json.dumps(result.to_json(), indent=1))
    acceptance = {
        "method": s.method,
        "measured": f"draftsmith build bench, {result.machine.get('date')}, {result.machine.get('device')}",
        "suites": {
            m.suite: {"tau": m.tau, "acceptance_by_position": m.acceptance_by_position}
            for m in result.summaries
            if m.method == s.method and m.tau
        },
    }
    (out / "drafter" / "acceptance.json").write_text(json.dumps(acceptance, indent=1))
    return {"file": "bench.json", "noise": noise_notes(result)}


def stage_export(s: BuildSettings, out: Path, target) -> dict:
    """The drafter in the format of each deployment engine that runs the method, as that engine runs
    it (no draftsmith-only inputs); a format that fails is noted, the rest still written."""
    from draftsmith.drafters.registry import METHODS
    from draftsmith.evaluation.llamacpp_peers import engine_variant
    from draftsmith.export.methods import export_directory
    from draftsmith.planning.engines import ENGINES

    src = out / "drafter"
    result: dict[str, Any] = {}
    for engine in DEPLOY_ENGINES:
        support = ENGINES[engine].methods.get(ENGINE_METHOD.get(s.method, s.method))
        fmt = FORMAT_OF.get(support.fmt) if support else None
        if fmt not in METHODS[s.method].export_formats:
            result[engine] = {
                "skipped": f"{ENGINES[engine].name} does not run {s.method} from a file we write"
            }
            continue
        lookup, cut = engine_variant(s.method, src)
        if fmt not in ("gguf", "speculators"):
            cut = None  # the other formats carry the whole vocabulary
        dest = out / "export" / (f"{s.method}.gguf" if fmt == "gguf" else f"{engine}-{fmt}")
        try:
            if fmt == "gguf":
                from draftsmith.deploy import llamacpp

                llamacpp.require()
            path, notes = export_directory(src, fmt, dest, target, None, lookup=lookup, draft_vocab=cut)
            entry: dict[str, Any] = {"format": fmt, "path": str(path), "notes": notes}
            if fmt == "gguf":
                from draftsmith.export import gguf

                tgt = gguf.write_target(target, out / "export", "q8_0")
                entry["command"] = gguf.server_command(s.method, tgt, path, directory=src)
            else:
                entry["command"] = launch_line(support.deploy, target_ref(s), path)
            result[engine] = entry
        except DraftsmithError as e:
            result[engine] = {"format": fmt, "failed": str(e)}
    return result


def target_ref(s: BuildSettings) -> str:
    """How an engine names the target: the user's --target, else the default target's hub id."""
    from draftsmith.export import DEFAULT_VERIFIER

    if s.target and Path(s.target).expanduser().exists():
        return str(Path(s.target).expanduser().resolve())
    return s.target or DEFAULT_VERIFIER


def launch_line(template: str, target: str, drafter: Path, drafts: int = 3) -> str:
    """An engine's launch line (planning/engines.py: T target, D drafter, K drafts) filled in."""
    line = re.sub(r"\bT\b", target, template)
    return re.sub(r"\bK\b", str(drafts), re.sub(r"\bD\b", str(drafter), line))


def budget_estimate(s: BuildSettings) -> str:
    return f"within a {s.budget_s / 60:.0f} min budget" if s.budget_s else ""
