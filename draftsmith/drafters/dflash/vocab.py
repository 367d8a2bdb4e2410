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

from dataclasses import replace

import numpy as np
import torch

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
