"""Inference for DFlash / DSpark: one parallel block pass per round over an append-only context cache.

The context cache holds each draft layer's projected keys/values of the target features of
committed positions. Committed positions never change, so nothing is rolled back: `accept`
appends the states the engine hands over from its verify pass. DSpark then walks the block
serially through the cheap Markov head and records each slot's confidence, which a threshold can
use to stop the draft early (prefix survival prod c_k below the threshold).
"""

from __future__ import annotations

from pathlib import Path

import torch

from draftsmith.drafters.base import Draft, Drafter
from draftsmith.drafters.checkpoint import read_sts, target_fingerprint
from draftsmith.drafters.dflash.checkpoint import load_drafter
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.drafters.dflash.recipe import DFlashRecipe
from draftsmith.engine.sampling import SamplingParams, draft_choice
from draftsmith.errors import DraftsmithError

PRETRAINED = Path(__file__).resolve().parents[1] / "pretrained"


def shipped_drafter(method: str, target) -> Path | None:
    """The drafter shipped in the package for this target, if there is one."""
    if not PRETRAINED.is_dir():
        return None
    fingerprint = target_fingerprint(target)
    for path in sorted(PRETRAINED.glob(f"*-{method}")):
        try:
            if DFlashConfig.load(path).target_fingerprint == fingerprint:
                return path
        except DraftsmithError:
            continue
    return None


class DFlashDrafter(Drafter):
    name = "dflash"
    description = "DFlash block diffusion drafter (one parallel pass per block; needs a trained drafter)"
    recipe = DFlashRecipe("dflash")

    def __init__(
        self,
        model: DFlashModel,
        target_vocab: int,
        confidence_threshold: float = 0.0,
        temperatures: tuple[float, ...] = (),
    ) -> None:
        self.model = model
        self.cfg = model.cfg
        self.hidden_layers = tuple(self.cfg.target_layers)
        self.first_slot = 0 if self.cfg.sample_from_anchor else 1  # z-lab layout: slot 0 drafts nothing
        self.default_k = self.cfg.block_size - self.first_slot
        self.target_vocab = target_vocab
        self.threshold = confidence_threshold
        self.confidences: list[float] = []
        self.confidence_logits: list[float] = []  # raw, before STS
        self.temperatures = temperatures  # STS, per slot (1.0 beyond the fitted ones)
        self.n_ctx = 0

    @classmethod
    def load_model(cls, target, drafter=None, dtype: torch.dtype | None = None) -> DFlashModel:
        """This method's drafter for `target`: a directory, a loaded model, or the shipped one."""
        drafter = drafter or shipped_drafter(cls.name, target)
        if not drafter:
            raise DraftsmithError(
                f"method {cls.name!r} needs --drafter DIR (a trained drafter; draftsmith ships one only "
                "for the default target): train one with `draftsmith train`"
            )
        model = drafter if isinstance(drafter, DFlashModel) else load_drafter(drafter, target, dtype)
        if (model.cfg.markov_rank > 0) != (cls.name == "dspark"):
            kind = "DSpark" if model.cfg.markov_rank else "DFlash"
            raise DraftsmithError(f"{drafter} is a {kind} drafter; use --method {kind.lower()}")
        return model

    @classmethod
    def build(cls, target, drafter=None, k=None, confidence_threshold: float = 0.0, **_) -> DFlashDrafter:
        """STS temperatures stored with the drafter (`sts.json`) scale its confidences."""
        path = drafter or shipped_drafter(cls.name, target)
        model = cls.load_model(target, path)  # the shipped one is looked up once
        return cls(model, target.runner.vocab_size, confidence_threshold, read_sts(path))

    def start(self, prompt: torch.Tensor, hidden, max_len: int) -> None:
        cfg, p = self.cfg, self.model.fc.weight
        shape = (1, cfg.num_kv_heads, max_len + 1, cfg.head_dim)
        self.ctx_k = [torch.empty(shape, dtype=p.dtype, device=p.device) for _ in self.model.layers]
        self.ctx_v = [torch.empty(shape, dtype=p.dtype, device=p.device) for _ in self.model.layers]
        self.n_ctx = 0
        self._append(hidden)

    def _append(self, hidden) -> None:
        if not hidden:
            return
        feats = torch.cat([hidden[layer] for layer in self.cfg.target_layers], -1)[None]
        feats = feats.to(self.model.fc.weight.dtype)
        n = feats.shape[1]
        pos = torch.arange(self.n_ctx, self.n_ctx + n, device=feats.device)[None]
        ctx = self.model.fuse_context(feats)
        self.last_ctx = ctx[:, -1:]
        for i, layer in enumerate(self.model.layers):
            k, v = layer.project_context(ctx, pos)
            self.ctx_k[i][:, :, self.n_ctx : self.n_ctx + n] = k
            self.ctx_v[i][:, :, self.n_ctx : self.n_ctx + n] = v
        self.n_ctx += n

    def accept(self, tokens: torch.Tensor, n_new: int, hidden) -> None:
        self._append(hidden)

    @torch.inference_mode()
    def propose(self, tokens: torch.Tensor, k: int, params: SamplingParams, generator) -> Draft:
        m, cfg = self.model, self.cfg
        b = cfg.block_size
        anchor_pos = tokens.shape[0] - 1
        if self.n_ctx != anchor_pos:
            raise RuntimeError(f"context cache out of sync: {self.n_ctx} states for anchor at {anchor_pos}")
        ids = torch.full((1, b), cfg.mask_token_id, dtype=torch.long, device=tokens.device)
        ids[0, 0] = tokens[-1]
        pos = torch.arange(anchor_pos, anchor_pos + b, device=tokens.device)[None]
        mask = torch.ones(1, b, self.n_ctx + b, dtype=torch.bool, device=tokens.device)
        kv = [
            (ck[:, :, : self.n_ctx], cv[:, :, : self.n_ctx])
            for ck, cv in zip(self.ctx_k, self.ctx_v, strict=True)
        ]
        anchor_ctx = self.last_ctx.expand(1, b, -1) if cfg.anchor_context else None
        first = self.first_slot
        k = min(k, b - first)
        states = m.backbone(ids, pos, kv, mask, anchor_ctx)[0, first : first + k]  # the block runs whole
        base = m.base_logits(states).float()
        chosen, dists, self.confidences, self.confidence_logits = [], [], [], []
        prev = m.prev_index(tokens[-1:])[0]
        survive = 1.0
        for s in range(k):
            logits = base[s] + m.markov_bias(prev).float() if cfg.markov_rank else base[s]
            if cfg.confidence:
                logit = float(m.confidence_logit(states[s], prev))
                temp = self.temperatures[s] if s < len(self.temperatures) else 1.0
                c = float(torch.sigmoid(torch.tensor(logit / temp)))
                self.confidence_logits.append(logit)
                self.confidences.append(c)
                survive *= c
                if s > 0 and survive < self.threshold:
                    break
            idx, q = draft_choice(logits, params, generator)
            chosen.append(idx)
            if q is not None:
                dists.append(q)
            prev = m.draft_row(idx)
        out = m.d2t[torch.stack(chosen)] if chosen else torch.empty(0, dtype=torch.long, device=tokens.device)
        probs = None
        if dists:
            probs = torch.zeros(len(dists), self.target_vocab, device=tokens.device)
            probs[:, m.d2t] = torch.stack(dists)
        return Draft(out, probs)


class DSparkDrafter(DFlashDrafter):
    name = "dspark"
    description = "DSpark: DFlash backbone + serial Markov head + confidence head (needs a trained drafter)"
    recipe = DFlashRecipe("dspark")
