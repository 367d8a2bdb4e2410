"""Train a DFlash or DSpark drafter from a target cache (or online, from the target itself).

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
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from tqdm import tqdm

from draftsmith.drafters.dflash.checkpoint import save_drafter, target_fingerprint
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.drafters.dflash.training import LABELS, block_loss, build_blocks, sample_anchors
from draftsmith.engine.allocator import keep_freed_memory
from draftsmith.errors import DraftsmithError
from draftsmith.training.cache import Sequence

STATE = "trainer_state.pt"
OLD_DEFAULTS = {
    "schedule": "cosine",
    "decay": 0.2,
    "label": "token",
    "anchor_context": False,
    "ce_weight": 0.1,
}
"""Settings added after the first checkpoints were written, at the values those runs used."""


@dataclass
class TrainConfig:
    method: str = "dspark"
    steps: int = 1000
    batch: int = 8  # sequences per step (global, split across ranks)
    anchors: int = 64  # anchored blocks per sequence
    lr: float = 6e-4
    warmup: float = 0.04
    schedule: str = "cosine"  # "cosine", or "wsd": constant after warmup, linear decay over the last `decay`
    decay: float = 0.2
    weight_decay: float = 0.0
    clip: float = 1.0
    block_size: int = 7
    num_layers: int = 1
    markov_rank: int = 64
    draft_vocab: int | None = 8192
    gamma: float = 4.0
    bf16: bool = False
    seed: int = 0
    eval_every: int = 100
    save_every: int = 200
    held_out: int = 16  # cache sequences kept for the held-out tau
    init: str = (
        "random"  # "random" (DeepSpec); "head": random + the target's final norm; "target": its last layers
    )
    anchor_context: bool = False  # add the context state at anchor - 1 to the block inputs
    ce_weight: float = 0.5  # DSpark: CE weight (paper: 0.1; 0.5 measured better); L1 gets 1 - ce_weight
    feature_weight: float = 0.0  # smooth-L1 regression onto the target's final-norm states (EAGLE)
    label: str = (
        "token"  # CE target: "token" (as written), "greedy" (target's argmax), "soft" (its distribution)
    )
    save_dtype: str = "float32"  # dtype of the drafter files (float16 to ship); resume state stays fp32

    def __post_init__(self) -> None:
        if self.method not in ("dflash", "dspark"):
            raise DraftsmithError(f"method must be dflash or dspark, got {self.method!r}")
        for name in ("steps", "batch", "anchors", "num_layers"):
            if getattr(self, name) < 1:
                raise DraftsmithError(f"{name} must be >= 1")
        if self.held_out < 0:
            raise DraftsmithError(f"held_out must be >= 0, got {self.held_out}")
        if self.lr <= 0 or not 0 <= self.warmup < 1:
            raise DraftsmithError("lr must be > 0 and warmup in [0, 1)")
        if self.schedule not in ("cosine", "wsd") or not 0 < self.decay <= 1:
            raise DraftsmithError("schedule must be cosine or wsd, with decay in (0, 1]")
        if self.init not in ("random", "head", "target"):
            raise DraftsmithError(f"init must be random, head or target, got {self.init!r}")
        if not 0 <= self.ce_weight <= 1:
            raise DraftsmithError(f"ce_weight must be in [0, 1], got {self.ce_weight}")
        if self.label not in LABELS:
            raise DraftsmithError(f"label must be one of {', '.join(LABELS)}, got {self.label!r}")
        if self.feature_weight < 0:
            raise DraftsmithError(f"feature_weight must be >= 0, got {self.feature_weight}")


def drafter_config(target, cfg: TrainConfig, layers: list[int], mask_token_id: int) -> DFlashConfig:
    """Draft width = target width; heads and MLP size follow the target (REFERENCE.md section 3)."""
    c = target.model.config
    rope = getattr(c, "rope_parameters", None) or {}
    dspark = cfg.method == "dspark"
    return DFlashConfig(
        hidden_size=c.hidden_size,
        num_heads=c.num_attention_heads,
        num_kv_heads=getattr(c, "num_key_value_heads", c.num_attention_heads),
        head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        intermediate_size=c.intermediate_size,
        target_layers=list(layers),
        mask_token_id=mask_token_id,
        target_vocab_size=target.runner.vocab_size,
        num_layers=cfg.num_layers,
        block_size=cfg.block_size,
        rms_norm_eps=float(getattr(c, "rms_norm_eps", 1e-6)),
        rope_theta=float(rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))),
        draft_vocab_size=cfg.draft_vocab,
        markov_rank=cfg.markov_rank if dspark else 0,
        confidence=dspark,
        gamma=cfg.gamma,
        anchor_context=cfg.anchor_context,
        method=cfg.method,
        target_name=target.name,
        target_fingerprint=target_fingerprint(target),
    )


def mask_token(target) -> int:
    """A fixed, rarely generated id whose frozen embedding marks the block's empty slots."""
    tok = target.tokenizer
    for cand in (getattr(tok, "unk_token_id", None), getattr(tok, "pad_token_id", None)):
        if cand is not None:
            return int(cand)
    return 0


def collate(seqs: list[Sequence], anchors: int, block: int, mask_id: int, g: torch.Generator):
    """Pad sequences to one length and lay out their anchored blocks.

    Target states come back in fp32 whatever dtype the target ran in: the drafter trains in fp32.
    """
    t = max(len(s.ids) for s in seqs)

    def pad(x: torch.Tensor, value=0) -> torch.Tensor:
        extra = t - x.shape[0]
        return x if not extra else torch.cat([x, x.new_full((extra, *x.shape[1:]), value)])

    ids = torch.stack([pad(s.ids) for s in seqs])
    mask = torch.stack([pad(s.loss_mask, False) for s in seqs])
    greedy = torch.stack([pad(s.greedy) for s in seqs]) if all(s.greedy is not None for s in seqs) else None
    batch = build_blocks(ids, mask, [sample_anchors(m, anchors, g) for m in mask], block, mask_id, greedy)
    feats, final, lse = (
        torch.stack([pad(getattr(s, name)) for s in seqs]).float() for name in ("features", "final", "lse")
    )
    return batch, feats, final, lse


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


METRIC_OF = {
    "tau": "tau_est",
    "tau_k3": "tau_est_k3",
    "tau_greedy": "tau_greedy",
    "tau_greedy_k3": "tau_greedy_k3",
}
"""held_out_tau key -> the block_loss metric it averages."""


@torch.no_grad()
def held_out_tau(model: DFlashModel, data, cfg: TrainConfig) -> dict[str, float]:
    """Accepted length on held-out sequences (fixed anchors), teacher-forced: "tau" against the
    answer's tokens and "tau_greedy" against the target's argmax (what greedy decoding accepts;
    exact on greedy answers), each if every block slot were verified and ("_k3") with drafts
    capped at 3 tokens."""
    keys = tuple(METRIC_OF)
    if not len(data):
        return {k: float("nan") for k in keys}
    g = torch.Generator().manual_seed(12345)
    sums = dict.fromkeys(keys, 0.0)
    device = model.fc.weight.device
    for i in range(len(data)):
        batch, feats, final, lse = collate([data[i]], cfg.anchors, cfg.block_size, model.cfg.mask_token_id, g)
        feats, final, lse = (x.to(device) for x in (feats, final, lse))
        _, m = block_loss(model, batch, feats, final, target_lse=lse)
        for k in keys:
            sums[k] += m.get(METRIC_OF[k], float("nan"))
    return {k: v / len(data) for k, v in sums.items()}


def train(
    target,
    data,
    cfg: TrainConfig,
    out_dir: str | Path,
    resume: bool = True,
    progress: bool = True,
    stop_after: int | None = None,
    held_out_data=None,
) -> dict:
    """Train on `data` (a TargetCache or any indexable of Sequence); write the drafter to out_dir.

    stop_after: end this run (with a checkpoint) at that step; a later call resumes from it.
    held_out_data: sequences never trained on for the held-out tau (first cfg.held_out of them);
    without it the last cfg.held_out sequences of `data` are held out.
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
    dcfg = drafter_config(target, cfg, layers, mask_token(target))
    torch.manual_seed(cfg.seed)
    model = DFlashModel(dcfg)
    model.init_weights(cfg.seed)
    if cfg.init == "target":
        model.init_from_target(target.model)
    elif cfg.init == "head":
        model.init_head_side(target.model)
    if dcfg.draft_vocab_size and dcfg.draft_vocab_size < dcfg.target_vocab_size:
        counts = torch.from_numpy(data.token_counts(dcfg.target_vocab_size))
        model.d2t = counts.topk(dcfg.draft_vocab_size).indices.sort().values
    device = target.device
    if device.type == "cpu":
        keep_freed_memory()  # ~100 MiB per-step tensors: stop page-faulting them in every step
    model.to(device)
    # the drafter trains in fp32 whatever dtype the target runs in (bf16 on GPUs and most new CPUs)
    emb = target.model.get_input_embeddings().weight.float()
    head = target.model.get_output_embeddings().weight.float()
    model.attach_target(emb, head)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.95))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg))
    step, log = 0, []
    state_path = out / STATE
    if resume and state_path.is_file():
        state = torch.load(state_path, map_location=device, weights_only=False)
        saved = {**OLD_DEFAULTS, **state["config"], "held_out_source": state.get("held_out_source", "split")}
        now = {**asdict(cfg), "held_out_source": held_source}
        diff = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
        if diff:
            raise DraftsmithError(
                f"{out} holds a run with other settings ({', '.join(diff)}); use another --out or --no-resume"
            )
        model.load_state_dict(state["model"])
        model.attach_target(emb, head)
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        step, log = state["step"], state["log"]
    if rank == 0:  # the settings next to the log, so runs can be compared (`draftsmith runs`)
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_config.json").write_text(json.dumps(asdict(cfg), indent=1))
    net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    bar = tqdm(total=cfg.steps, initial=step, desc=f"train {cfg.method}", disable=not progress or rank != 0)
    t0 = time.perf_counter()
    elapsed0 = log[-1].get("seconds", 0.0) if log else 0.0  # training wall time before a resume
    end = min(cfg.steps, stop_after or cfg.steps)
    while step < end:
        g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
        pick = torch.randint(len(train_idx), (cfg.batch,), generator=g).tolist()
        mine = pick[rank::world] or pick[:1]
        batch, feats, final, lse = collate(
            [data[train_idx[i]] for i in mine], cfg.anchors, cfg.block_size, dcfg.mask_token_id, g
        )
        feats, final, lse = (x.to(device) for x in (feats, final, lse))
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            loss, metrics = block_loss(
                net if world == 1 else net.module,
                batch,
                feats,
                final,
                target_lse=lse,
                label=cfg.label,
                ce_weight=cfg.ce_weight,
                feature_weight=cfg.feature_weight,
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.clip))
        opt.step()
        sched.step()
        step += 1
        row = {"step": step, **metrics, "grad_norm": round(grad_norm, 4), "lr": sched.get_last_lr()[0]}
        row["seconds"] = round(time.perf_counter() - t0 + elapsed0, 1)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            row.update({f"held_out_{k}": v for k, v in held_out_tau(model, held, cfg).items()})
        log.append(row)
        bar.set_postfix(loss=f"{metrics['loss']:.3f}", tau=f"{metrics['tau_est']:.2f}")
        bar.update()
        if rank == 0 and (step % cfg.save_every == 0 or step == end):
            save_drafter(model, out, dtype=getattr(torch, cfg.save_dtype))
            tmp = out / (STATE + ".tmp")
            torch.save(
                {
                    "config": asdict(cfg),
                    "model": model.state_dict(),
                    "optimizer": opt.state_dict(),
                    "scheduler": sched.state_dict(),
                    "step": step,
                    "log": log,
                    "held_out_source": held_source,
                },
                tmp,
            )
            os.replace(tmp, state_path)
            (out / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    bar.close()
    return {
        "steps": step,
        "seconds": round(time.perf_counter() - t0, 1),
        "last": log[-1] if log else {},
        "train_sequences": len(train_idx),
        "held_out_sequences": len(held),
    }
