"""Prompt-lookup guesses fed to a block drafter's slots (`DFlashConfig.lookup_input`).

A third of DSpark's first-draft misses on code and math are copies: the token that followed an
earlier occurrence of the current suffix (docs/experiments.md). The hybrid drafter
exploits that by rules; this gives the drafter itself the guess, so training decides how far to
trust it. Training and decoding call the same function on the same tokens (the context through the
anchor), so what the drafter learns from is exactly what it sees when it drafts.
"""

from __future__ import annotations

import numpy as np

from draftsmith.drafters.ngram import lookup

MIN_MATCH = 1
"""Shortest suffix match that yields a guess; the match length goes in too, so the drafter learns
how much a short match is worth instead of a rule discarding it."""


def slot_guesses(seq: np.ndarray, block_size: int, max_match: int) -> tuple[np.ndarray, np.ndarray]:
    """For a context seq ending at the anchor, each block slot's lookup guess of the token it
    predicts (slot k predicts anchor + k + 1: the continuation's k-th token) and the suffix match
    length behind it; slots past the continuation (or with no match) get id 0 and length 0."""
    ids = np.zeros(block_size, dtype=np.int64)
    lens = np.zeros(block_size, dtype=np.int64)
    cont, n = lookup(seq, block_size, max_match, MIN_MATCH)
    ids[: len(cont)] = cont
    lens[: len(cont)] = n
    return ids, lens


def batch_guesses(
    seqs: list[np.ndarray], anchors: list[np.ndarray], block_size: int, max_match: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every anchored block's slot guesses and match lengths [b, n_anchor * block_size] (zeros for
    the padding anchors of short lists), laid out as `build_blocks` lays out its blocks. Numpy only,
    so a GPU trainer can compute the next batch's guesses in a worker process while it steps."""
    n_anchor = max(1, max((len(a) for a in anchors), default=0))
    out_ids = np.zeros((len(seqs), n_anchor * block_size), dtype=np.int64)
    out_lens = np.zeros_like(out_ids)
    for i, (seq, a) in enumerate(zip(seqs, anchors, strict=True)):
        for j, anchor in enumerate(np.asarray(a).tolist()):
            cols = slice(j * block_size, (j + 1) * block_size)
            out_ids[i, cols], out_lens[i, cols] = slot_guesses(seq[: anchor + 1], block_size, max_match)
    return out_ids, out_lens


def drop_lookup(model):
    """A copy of a lookup-input drafter (its dtype, device and attached target) without that input:
    what every export format carries and every other engine runs. A slot with no guess adds nothing
    to its input (`DFlashModel.guess_inputs`), so the copy drafts exactly what the drafter does when
    no suffix matches, and what it learned for that case under `train --lookup-dropout`."""
    from dataclasses import replace

    from draftsmith.drafters.dflash.model import DFlashModel

    if not model.cfg.lookup_input:
        return model
    state = {k: v for k, v in model.state_dict().items() if not k.startswith(DFlashModel.DROPPABLE)}
    return model.derive(replace(model.cfg, lookup_input=0), state)
