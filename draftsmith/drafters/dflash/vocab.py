"""Grow a trained DFlash/DSpark drafter's draft vocabulary without retraining it.

A block drafter reads out through the target's own frozen lm_head rows (`d2t` picks them), so a
token outside the draft vocabulary can never be drafted: on the default target 4-11% of what it
writes on the bench suites was outside an 8,192-token draft vocabulary (docs/experiments.md). Adding
rows costs no training: the drafter's states already approximate the target's, and the target's
head rows for the new tokens score them. DSpark's Markov head gets a zero bias row for each new
token, and each new previous-token row starts as the shared "outside" row it used until now, so
the grown drafter proposes exactly what the old one did wherever the old tokens win. Grown to the
whole vocabulary it has no draft vocabulary at all, which the z-lab and DeepSpec formats require.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.errors import DraftsmithError
from draftsmith.training.jsonl import read_rows


def answer_token_counts(paths: list[str], target) -> np.ndarray:
    """How often each target token occurs in the answers (`answer_ids`, else the encoded `answer`)."""
    counts = np.zeros(target.runner.vocab_size, dtype=np.int64)
    for path in paths:
        n = 0
        for row in read_rows(path):
            ids = row.get("answer_ids")
            if ids is None and isinstance(row.get("answer"), str):
                ids = target.tokenizer.encode(row["answer"], add_special_tokens=False)
            if not ids:
                continue
            ids = np.asarray(ids, dtype=np.int64)
            if ids.min() < 0 or ids.max() >= len(counts):
                raise DraftsmithError(f"{path}: token ids outside the target's vocabulary of {len(counts)}")
            counts += np.bincount(ids, minlength=len(counts))
            n += 1
        if not n:
            raise DraftsmithError(f"{path}: no rows with answer_ids or an answer")
    return counts


def grown_ids(d2t: list[int], counts: np.ndarray, size: int) -> list[int]:
    """The old draft ids plus the most frequent others (by `counts` over target ids), sorted."""
    if size < len(d2t):
        raise DraftsmithError(f"the drafter already has {len(d2t)} draft tokens; {size} would shrink it")
    if size > len(counts):
        raise DraftsmithError(f"the target has {len(counts)} tokens; a draft vocabulary of {size} exceeds it")
    have = set(d2t)
    order = np.argsort(-counts, kind="stable")
    extra = [int(t) for t in order if int(t) not in have][: size - len(d2t)]
    return sorted(have | set(extra))


@torch.no_grad()
def grow_vocab(model: DFlashModel, counts: np.ndarray, size: int) -> DFlashModel:
    """A copy of `model` (fp32, no target attached) whose draft vocabulary holds `size` tokens."""
    cfg = model.cfg
    if not cfg.draft_vocab_size:
        raise DraftsmithError("this drafter already drafts over the whole target vocabulary")
    if cfg.markov_vocab != "draft" and cfg.markov_rank:
        raise DraftsmithError("only drafters with draft-vocabulary Markov rows can grow their vocabulary")
    old = model.d2t.tolist()
    new = grown_ids(old, counts, size)
    whole = len(new) == len(counts)  # the target's whole vocabulary: no draft vocabulary left
    grown = DFlashModel(replace(cfg, draft_vocab_size=None if whole else len(new)))
    state = {k: v.float() if v.is_floating_point() else v for k, v in model.state_dict().items()}
    where = {t: i for i, t in enumerate(new)}
    rows = torch.tensor([where[t] for t in old])
    vd = len(old)
    state["d2t"] = torch.tensor(new, dtype=torch.long)
    if cfg.markov_rank:
        out = state["markov_out.weight"]
        w = out.new_zeros(len(new), out.shape[1])  # no bias yet for a new token
        w[rows] = out
        state["markov_out.weight"] = w
        emb = state["markov_in.weight"]
        w = emb[vd].expand(len(new) + 1, -1).clone()  # a new token was "outside" until now
        w[rows] = emb[:vd]
        state["markov_in.weight"] = w
    grown.load_state_dict(state)
    return grown.eval().requires_grad_(False)


# --- frequency-ranked drafting (FR-Spec) -------------------------------------------------------------

COUNTS_FILE = "token_counts.safetensors"
"""How often each target token occurred in a drafter's training answers, saved beside its weights
(`save_drafter`): what ranks the tokens when decoding cuts the head to the most frequent ones."""

DEFAULT_CUT = 8192
"""The draft vocabulary decoding cuts a wider drafter to when it carries its token counts (FR-Spec,
Zhao et al. 2025): on the default target the head over 49,152 tokens doubled a DSpark round's drafting
time against 8,192 for +0.017 dev tau (docs/experiments.md)."""


def default_cut(counts: np.ndarray | None, vocab: int) -> int:
    """The draft vocabulary decoding cuts to by default: DEFAULT_CUT where the drafter drafts more
    tokens than that and its answers held at least that many distinct tokens (a ranking of mostly
    unseen tokens would keep arbitrary ones), else 0 (no cut)."""
    if counts is None or vocab <= DEFAULT_CUT or int((np.asarray(counts) > 0).sum()) < DEFAULT_CUT:
        return 0
    return DEFAULT_CUT


def write_counts(directory: str | Path, counts: np.ndarray | torch.Tensor) -> None:
    counts = torch.as_tensor(np.asarray(counts)).to(torch.int64).clamp(max=2**31 - 1).to(torch.int32)
    tmp = Path(directory) / (COUNTS_FILE + ".tmp")
    save_file({"counts": counts.contiguous()}, str(tmp))
    os.replace(tmp, Path(directory) / COUNTS_FILE)


def read_counts(directory: object) -> np.ndarray | None:
    """The token counts stored with a drafter directory, or None when it has none."""
    if not isinstance(directory, str | Path) or not (Path(directory) / COUNTS_FILE).is_file():
        return None
    path = Path(directory) / COUNTS_FILE
    try:
        counts = load_file(str(path))["counts"]
    except Exception as e:  # safetensors raises its own error type for a corrupt file
        raise DraftsmithError(f"could not read {path}: {e}; delete it or retrain") from e
    if counts.dim() != 1 or bool((counts < 0).any()):
        raise DraftsmithError(f"{path}: not a vector of token counts; delete it or retrain")
    return counts.numpy().astype(np.int64)


def frequent_ids(d2t: torch.Tensor, counts: np.ndarray, size: int) -> torch.Tensor:
    """The `size` draft tokens (target ids, from d2t) the answers held most often, sorted by id (ties
    go to the lower id, so the cut is deterministic)."""
    if len(counts) <= int(d2t.max()):
        raise DraftsmithError(
            f"token counts cover {len(counts)} tokens, the drafter drafts up to id {int(d2t.max())}"
        )
    ids = d2t.cpu().long()
    c = torch.from_numpy(counts)[ids].double() - ids.double() * 1e-9  # stable: lower id first on ties
    return ids[c.topk(size).indices].sort().values


@torch.no_grad()
def cut_vocab(model: DFlashModel, size: int) -> DFlashModel:
    """A copy of `model` (its dtype, device and attached target) drafting only the `size` tokens its
    training answers held most often (its `token_counts`): its head reads `size` rows instead of all
    of them. Every kept token keeps its logit (base and Markov bias), and every previous token keeps
    its own Markov row (the copy indexes them by target id), so the cut drafter proposes what the
    whole one does wherever the whole one's pick is among the kept tokens."""
    cfg = model.cfg
    vd = model.d2t.shape[0]
    if model.token_counts is None:
        raise DraftsmithError(
            "this drafter carries no token counts to rank its vocabulary by (token_counts.safetensors, "
            "written by `draftsmith train`): keep every token (--draft-vocab 0), or add them with "
            "`draftsmith grow-vocab --answers ...`"
        )
    if not 0 < size < vd:
        raise DraftsmithError(
            f"a cut draft vocabulary must hold 1..{vd - 1} tokens (the drafter has {vd}), got {size}"
        )
    keep = frequent_ids(model.d2t, model.token_counts, size)
    where = torch.full((cfg.target_vocab_size,), -1, dtype=torch.long)
    where[model.d2t.cpu().long()] = torch.arange(vd)
    rows = where[keep]  # draft indices of the kept tokens in the whole drafter
    state = dict(model.state_dict())
    state["d2t"] = keep
    if cfg.markov_rank:
        state["markov_out.weight"] = state["markov_out.weight"][rows.to(state["markov_out.weight"].device)]
        if cfg.markov_vocab == "draft":  # draft-index rows + one shared row -> one row per target id
            by_id = where.clamp(min=0)
            by_id[where < 0] = vd  # tokens outside the whole drafter's vocabulary: the shared row
            state["markov_in.weight"] = state["markov_in.weight"][by_id.to(state["markov_in.weight"].device)]
    markov = "target" if cfg.markov_rank else cfg.markov_vocab
    return model.derive(replace(cfg, draft_vocab_size=size, markov_vocab=markov), state, rows)
