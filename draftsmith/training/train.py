"""Train any trainable method's drafter from a target cache (or online, from the target itself).

AdamW, linear warmup then cosine decay or a constant rate with a short linear decay at the end
("wsd", which keeps a run extendable), gradient clipping, fp32 or bf16 autocast, periodic held-out
accepted length, atomic checkpoints and exact resume: batch s is drawn from a generator seeded by
(seed, s), so a resumed run sees the same batches and, with the optimizer state restored, lands on
the same weights as an uninterrupted one. Under `torchrun` each rank takes its slice of every
batch and gradients are averaged by DistributedDataParallel; rank 0 writes checkpoints.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tqdm import tqdm

from draftsmith.drafters.registry import recipe_for
from draftsmith.engine.allocator import bound_freed_memory, keep_freed_memory
from draftsmith.errors import DraftsmithError
from draftsmith.training.recipe import Recipe, make_options
from draftsmith.training.tensorboard import Curves

STATE = "trainer_state.pt"
MAX_NONFINITE = 20
"""Consecutive steps with a non-finite gradient after which a run stops: one bad bf16 batch is skipped,
a run that keeps producing them has diverged (lower the learning rate, or train without bf16)."""
OLD_DEFAULTS = {"schedule": "cosine", "decay": 0.2, "init_from": None, "grown_lr": 1.0, "regrow": ()}
"""Shared settings added after the first checkpoints were written, at the values those runs used
(a recipe's `old_defaults` does the same for its options)."""


@dataclass
class TrainConfig:
    """Settings every method shares; `options` holds the method's own (its recipe's dataclass)."""

    method: str = "dspark"
    steps: int = 1000
    batch: int = 8  # sequences per step (global, split across ranks)
    lr: float = 6e-4
    warmup: float = 0.04
    schedule: str = "cosine"  # "cosine", or "wsd": constant after warmup, linear decay over the last `decay`
    decay: float = 0.2
    weight_decay: float = 0.0
    clip: float = 1.0
    bf16: bool = False
    seed: int = 0
    eval_every: int = 100
    save_every: int = 200
    held_out: int = 16  # cache sequences kept for the held-out tau
    save_dtype: str = "float32"  # dtype of the drafter files (float16 to ship); resume state stays fp32
    init_from: str | None = None  # a trained drafter of this method and target to start from (fine-tune)
    # learning-rate multiplier of the weights a fine-tune adds (they start at zero, a no-op, and at a
    # fine-tune's low rate Adam grows them by ~lr a step: an earlier lookup_in reached rms 0.003 in
    # 200 steps, against 0.065 for the weights around it)
    grown_lr: float = 1.0
    # loaded weights that also learn at lr x grown_lr (name prefixes): continuing a fine-tune that grew
    # them (e.g. lookup_in, lookup_len) at the rate they grew at, while the rest keeps the low rate
    regrow: tuple[str, ...] = ()
    options: Any = None  # the method's options; None or a dict -> built (and validated) by its recipe

    def __post_init__(self) -> None:
        self.recipe: Recipe = recipe_for(self.method)
        if self.options is None or isinstance(self.options, dict):
            self.options = make_options(self.recipe, self.options or {})
        elif not isinstance(self.options, self.recipe.options):
            raise DraftsmithError(f"options for {self.method} must be {self.recipe.options.__name__}")
        self.regrow = tuple(self.regrow)  # a list from train_config.json compares equal on resume
        if self.regrow and self.init_from is None:
            raise DraftsmithError("regrow names weights loaded by --init-from: give --init-from too")
        if self.init_from is not None:  # one spelling, so resuming compares like with like
            self.init_from = str(Path(self.init_from).resolve())
        for name in ("steps", "batch"):
            if getattr(self, name) < 1:
                raise DraftsmithError(f"{name} must be >= 1")
        if self.held_out < 0:
            raise DraftsmithError(f"held_out must be >= 0, got {self.held_out}")
        if not (math.isfinite(self.grown_lr) and self.grown_lr > 0):
            raise DraftsmithError(f"grown_lr must be a finite number > 0, got {self.grown_lr}")
        if self.lr <= 0 or not 0 <= self.warmup < 1:
            raise DraftsmithError("lr must be > 0 and warmup in [0, 1)")
        if self.schedule not in ("cosine", "wsd") or not 0 < self.decay <= 1:
            raise DraftsmithError("schedule must be cosine or wsd, with decay in (0, 1]")

    def flat(self) -> dict[str, Any]:
        """Shared settings and the method's options in one dict (train_config.json, resume checks)."""
        shared = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "options"}
        return {**shared, **asdict(self.options)}

    @classmethod
    def from_flat(cls, **values: Any) -> TrainConfig:
        """The inverse of flat(): names that are not shared settings go to the method's options."""
        shared = {f.name for f in fields(cls)} - {"options"}
        return cls(
            **{k: v for k, v in values.items() if k in shared},
            options={k: v for k, v in values.items() if k not in shared},
        )


def lr_lambda(cfg: TrainConfig):
    warm = max(1, int(cfg.warmup * cfg.steps))
    decay_start = cfg.steps - max(1, int(cfg.decay * cfg.steps))

    def f(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        if cfg.schedule == "wsd":
            return 1.0 if step < decay_start else max(0.0, (cfg.steps - step) / (cfg.steps - decay_start))
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, cfg.steps - warm))))

    return f


def _dist() -> tuple[int, int]:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


WARM_START_FREE = frozenset({"gamma", "extra", "target_name"})
"""Drafter config fields a fine-tune may change (loss weighting, free-form notes, what the user calls
the target: its weights are checked by `target_fingerprint`)."""


def warm_start(model: torch.nn.Module, recipe: Recipe, target, source: str) -> set[str]:
    """Load a trained drafter's weights into `model`: fine-tuning a shipped drafter on one's own
    workload, or continuing a finished run with a new schedule. The options must build the same
    drafter (the shapes and the config fields, e.g. which target layers it reads); a mismatch is
    refused by name, not half-loaded. Loaded in fp32: the stored weights, not a bf16 rounding.
    Returns the names of the weights the fine-tune adds (they keep their no-op start)."""
    loaded = recipe.load(target, source, dtype=torch.float32)  # refuses a missing / foreign drafter
    src, own = loaded.state_dict(), model.state_dict()
    # heads this fine-tune adds (they start as a no-op, so the run begins at the loaded drafter)
    grown = {k for k in own if k not in src and k.startswith(tuple(getattr(model, "GROWABLE", ())))}
    # inputs this fine-tune turns off (their weights are left behind)
    dropped = {k for k in src if k not in own and k.startswith(tuple(getattr(model, "DROPPABLE", ())))}
    # buffers the new drafter lays out anew (a draft vocabulary of another size): its own stay
    relaid = getattr(model, "RELAYOUT", ())
    dropped |= {k for k in src if k in relaid and k in own and src[k].shape != own[k].shape}
    bad = [
        f"{k}: {tuple(src[k].shape) if k in src else 'missing'} in {source}, "
        f"{tuple(own[k].shape) if k in own else 'absent'} here"
        for k in sorted((set(src) | set(own)) - grown - dropped)
        if k not in src or k not in own or src[k].shape != own[k].shape
    ]
    theirs, ours = getattr(loaded, "cfg", None), getattr(model, "cfg", None)
    if is_dataclass(theirs) and is_dataclass(ours):
        a, b = asdict(theirs), asdict(ours)
        growable = set(getattr(model, "GROWABLE_CONFIG", ()))
        droppable = set(getattr(model, "DROPPABLE_CONFIG", ()))
        free = set(getattr(model, "RELAYOUT_CONFIG", ()))
        bad += [
            f"{k}: {a.get(k)!r} in {source}, {b.get(k)!r} here"
            for k in sorted(set(a) | set(b))
            if k not in WARM_START_FREE | free
            and a.get(k) != b.get(k)
            and not (k in growable and (b.get(k) or 0) > (a.get(k) or 0))  # raised by this fine-tune
            and not (k in droppable and not b.get(k))  # turned off by this fine-tune
        ]
    if bad:
        raise DraftsmithError(
            f"--init-from {source}: these options build another drafter ({'; '.join(bad[:4])}"
            f"{'; ...' if len(bad) > 4 else ''}); pass the settings in its config.json"
        )
    # every key but the grown ones was checked above; those keep their no-op start
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in src.items() if k not in dropped}, strict=False)
    if hasattr(model, "start_grown"):  # e.g. added draft layers start as the identity
        model.start_grown(grown)
    theirs = getattr(loaded, "token_counts", None)  # the answers it saw count for the new one too
    if (
        theirs is not None
        and getattr(model, "token_counts", None) is not None
        and len(theirs) == len(model.token_counts)
    ):
        model.token_counts = model.token_counts + theirs
    recipe.attach(model, target)
    return grown


HELD_OUT_FILE = "held_out.json"
"""The drafter's latest held-out scores, written beside its weights at each evaluation."""


def held_out_tau(model: torch.nn.Module, data, cfg: TrainConfig) -> dict[str, float]:
    """The method's held-out metrics (teacher-forced accepted lengths) on every sequence of data."""
    return cfg.recipe.evaluate(model, [data[i] for i in range(len(data))], cfg.options)


def train(
    target,
    data,
    cfg: TrainConfig,
    out_dir: str | Path,
    resume: bool = True,
    progress: bool = True,
    stop_after: int | None = None,
    held_out_data=None,
    compile_loss: bool = False,
) -> dict:
    """Train on `data` (a TargetCache or any indexable of Sequence); write the drafter to out_dir.

    stop_after: end this run (with a checkpoint) at that step; a later call resumes from it.
    held_out_data: sequences never trained on for the held-out tau (first cfg.held_out of them);
    without it the last cfg.held_out sequences of `data` are held out.
    compile_loss: run the method's loss (forward and backward) through torch.compile: the same
    maths with fused kernels; on a CPU the loss is a chain of memory-bound passes over
    [sequences, slots, draft vocabulary] tensors, which fusion shortens (an earlier profile).
    """
    rank, world = _dist()
    out = Path(out_dir)
    held_source = "external" if held_out_data is not None else "split"
    if held_out_data is not None:
        n_held = 0
        held = [held_out_data[i] for i in range(min(cfg.held_out, len(held_out_data)))]
    else:
        n_held = min(cfg.held_out, max(0, len(data) - 1))
        held = [data[i] for i in range(len(data) - n_held, len(data))]
    train_idx = list(range(len(data) - n_held))
    if not train_idx:
        raise DraftsmithError("no training sequences")
    layers = list(data.layers) if hasattr(data, "layers") else None
    if layers is None:
        raise DraftsmithError("training data must say which target layers its features come from")
    recipe, opts = cfg.recipe, cfg.options
    torch.manual_seed(cfg.seed)
    device = target.device
    if device.type == "cpu":  # ~100 MiB per-step tensors: no page faults, or bounded growth
        keep_freed_memory() if recipe.heap_only else bound_freed_memory()
    model = recipe.build(target, opts, layers, data)
    state_path = out / STATE
    state = None
    if resume and state_path.is_file():  # a resume loads the run's own weights, not init_from's
        state = torch.load(state_path, map_location=device, weights_only=False)
    grown: set[str] = set(state.get("grown", ())) if state else set()
    if state is not None and state.get("token_counts") is not None:  # what this run counted at its start
        model.token_counts = state["token_counts"]
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if cfg.init_from and state is None:
        grown = warm_start(model, recipe, target, cfg.init_from)
        for prefix in cfg.regrow:
            hits = {n for n, _ in named if n.startswith(prefix)}
            if not hits:
                raise DraftsmithError(f"--regrow {prefix}: no weight of this drafter is named so")
            grown |= hits
    params = [p for _, p in named]
    groups = [{"params": [p for n, p in named if n not in grown]}]
    if grown:  # weights the fine-tune adds (or --regrow names), at their own rate (LambdaLR scales all alike)
        groups.append({"params": [p for n, p in named if n in grown], "lr": cfg.lr * cfg.grown_lr})
    # fused: one kernel for all parameters (on the 2-core CPU 4 ms a step against ~100 ms for foreach)
    fused = device.type in ("cpu", "cuda")
    opt = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.95), fused=fused)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg))
    step, log = 0, []
    if state is not None:
        saved = {**OLD_DEFAULTS, **recipe.old_defaults, **state["config"]}
        saved["held_out_source"] = state.get("held_out_source", "split")
        now = {**cfg.flat(), "held_out_source": held_source}
        diff = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
        if diff:
            raise DraftsmithError(
                f"{out} holds a run with other settings ({', '.join(diff)}); use another --out or --no-resume"
            )
        model.load_state_dict(state["model"])
        recipe.attach(model, target)
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        step, log = state["step"], state["log"]
    if rank == 0:  # the settings next to the log, so runs can be compared (`draftsmith runs`)
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_config.json").write_text(json.dumps(cfg.flat(), indent=1))
    net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    loss_fn = torch.compile(recipe.loss, dynamic=True) if compile_loss else recipe.loss
    bar = tqdm(total=cfg.steps, initial=step, desc=f"train {cfg.method}", disable=not progress or rank != 0)
    curves = Curves(out, enabled=rank == 0)
    t0 = time.perf_counter()
    elapsed0 = log[-1].get("seconds", 0.0) if log else 0.0  # training wall time before a resume
    end = min(cfg.steps, stop_after or cfg.steps)
    bad = 0  # consecutive steps with a non-finite gradient
    while step < end:
        g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        pick = torch.randint(len(train_idx), (cfg.batch,), generator=g).tolist()
        mine = pick[rank::world] or pick[:1]
        batch = recipe.batch([data[train_idx[i]] for i in mine], opts, model, g)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            loss, metrics = loss_fn(net if world == 1 else net.module, batch, opts)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.clip))
        # a non-finite gradient (a bf16 overflow) would turn every weight into NaN at once: skip that
        # step (an earlier GPU run at lr 2e-3 lost its drafter so, ~90% of the way through)
        finite = math.isfinite(grad_norm)
        bad = 0 if finite else bad + 1
        if finite:
            opt.step()
        elif bad >= MAX_NONFINITE:
            raise DraftsmithError(
                f"training diverged: {bad} steps in a row had non-finite gradients (up to step {step + 1}); "
                f"the last checkpoint in {out} is from before; lower --lr or train without --bf16"
            )
        sched.step()
        step += 1
        row = {"step": step, **metrics, "grad_norm": round(grad_norm, 4), "lr": sched.get_last_lr()[0]}
        if not finite:
            row["skipped"] = True  # the weights did not change at this step
        row["seconds"] = round(time.perf_counter() - t0 + elapsed0, 1)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            scores = {f"held_out_{k}": v for k, v in recipe.evaluate(model, held, opts).items()}
            row.update(scores)
            if rank == 0:  # kept with the drafter: `export --no-lookup` reports what that input is worth
                (out / HELD_OUT_FILE).write_text(json.dumps({"step": step, "sequences": len(held), **scores}))
        log.append(row)
        curves.add(row)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}", tau=f"{metrics.get('tau_est', float('nan')):.2f}")
        bar.update()
        if rank == 0 and (step % cfg.save_every == 0 or step == end):
            recipe.save(model, out, getattr(torch, cfg.save_dtype))
            tmp = out / (STATE + ".tmp")
            torch.save(
                {
                    "config": cfg.flat(),
                    "model": model.state_dict(),
                    "optimizer": opt.state_dict(),
                    "scheduler": sched.state_dict(),
                    "step": step,
                    "log": log,
                    "held_out_source": held_source,
                    "grown": sorted(grown),  # the weights at lr x grown_lr: a resume rebuilds that group
                    "token_counts": getattr(model, "token_counts", None),
                },
                tmp,
            )
            os.replace(tmp, state_path)
            (out / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    bar.close()
    curves.close()
    return {
        "steps": step,
        "seconds": round(time.perf_counter() - t0, 1),
        "last": log[-1] if log else {},
        "train_sequences": len(train_idx),
        "held_out_sequences": len(held),
    }
