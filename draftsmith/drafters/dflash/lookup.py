"""Prompt-lookup guesses fed to a block drafter's slots (`DFlashConfig.lookup_input`).

A third of DSpark's first-draft misses on code and math are copies: the token that followed an
earlier occurrence of the current suffix (docs/BENCHMARKS.md, session 28). The hybrid drafter
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
