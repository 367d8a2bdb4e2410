"""The target cache: what a drafter learns from, computed once by the target.

Per token: its id, the loss mask (answer tokens only), the hidden states of the chosen target
layers (concatenated), the final-norm hidden state, and the log-normaliser of the target's logits
(so DSpark's L1 against the target distribution needs only the draft-vocabulary logits). Stored as
memory-mapped .npy shards plus a manifest tied to the target and settings; shards are written
atomically, so an interrupted build resumes at the first missing shard, and a cache built for
another target or other layers is refused instead of mixed in.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from draftsmith.drafters.checkpoint import target_fingerprint
from draftsmith.engine.runner import FINAL
from draftsmith.errors import DraftsmithError
from draftsmith.training.regenerate import iter_pairs

FORMAT = "draftsmith-cache/2"  # /2 adds the target's greedy (argmax) token per position
DTYPES = {"float16": np.float16, "float32": np.float32}
OLD_MANIFEST = {"rows": "all"}
"""Manifest keys added later, at the values older caches were built with."""


@dataclass
class Sequence:
    ids: torch.Tensor  # [T] long
    loss_mask: torch.Tensor  # [T] bool
    features: torch.Tensor  # [T, n_layers * H]
    final: torch.Tensor  # [T, H]
    lse: torch.Tensor  # [T] logsumexp of the target logits at each position
    greedy: torch.Tensor | None = None  # [T] long: the target's argmax next token at each position


TRUNCATED = frozenset({"length", "max_tokens", "context"})
"""finish_reason values of answers cut by the token budget: they did not end, so no EOS is learned."""


def tokenize_row(target, row: dict, max_len: int) -> tuple[list[int], list[bool]]:
    """Chat-formatted prompt + answer (+ EOS if the answer really ended); only the answer is learned.

    The answer's ids are the target's own (`answer_ids`, written by `data regenerate`) when the row
    has them: text decoded and encoded again can tokenize differently from what the target wrote.
    An answer cut at the token budget (finish_reason "length") gets no EOS: the target never chose
    to stop there. Rows without a finish_reason (human-written answers) are complete answers.
    """
    p = target.encode(row["prompt"])
    ids = row.get("answer_ids")
    if ids is not None:
        vocab = target.runner.vocab_size
        if not isinstance(ids, list) or not all(isinstance(t, int) and 0 <= t < vocab for t in ids):
            raise DraftsmithError(
                f"answer row {row.get('id', '?')}: answer_ids are not token ids of this target "
                f"(vocabulary {vocab}); regenerate the answers with this target"
            )
        a = list(ids)
    else:
        a = target.tokenizer.encode(row["answer"], add_special_tokens=False)
    eos = row.get("eos_id", min(target.eos_ids) if target.eos_ids else None)
    if eos is not None and row.get("finish_reason") not in TRUNCATED:
        a = a + [eos]
    ids = (p + a)[:max_len]
    return ids, ([False] * len(p) + [True] * len(a))[:max_len]


def learnable_pairs(
    target, answers: str | Path, max_len: int, limit: int | None = None, keep_all: bool = False
) -> tuple[list[tuple[list[int], list[bool]]], int]:
    """Tokenized rows that keep at least one answer token within max_len, and how many were dropped.

    A prompt of max_len tokens or more leaves no answer inside the window: caching it would cost a
    full target pass (the most expensive kind, at full length) for a sequence with nothing to learn,
    and a held-out set scores it as an accepted length of 1. `limit` counts answer rows before the
    drop, so a limited cache holds the same answers as before. keep_all: every row, as caches were
    built by older versions (their documented held-out sets include such rows). No row left: an error.
    """
    pairs = [tokenize_row(target, r, max_len) for r in iter_pairs(answers)][:limit]
    kept = pairs if keep_all else [(ids, mask) for ids, mask in pairs if any(mask)]
    dropped = len(pairs) - len(kept)
    if not kept:
        raise DraftsmithError(
            f"{answers} has no prompt/answer rows with an answer inside --max-len {max_len}"
            + (f" ({dropped} prompts are {max_len} tokens or longer)" if dropped else "")
        )
    return kept, dropped


@torch.inference_mode()
def target_sequence(target, ids: list[int], loss_mask: list[bool], layers: list[int]) -> Sequence:
    """Run the target once over a sequence and collect what the drafter trains on."""
    runner = target.runner
    runner.reset(len(ids))
    out = runner.forward(torch.tensor(ids), n_logits=len(ids), hidden=(*layers, FINAL))
    feats = torch.cat([out.hidden[i] for i in layers], -1)
    logits = out.logits.float()
    return Sequence(
        torch.tensor(ids),
        torch.tensor(loss_mask),
        feats,
        out.hidden[FINAL],
        torch.logsumexp(logits, -1),
        logits.argmax(-1),
    )


def bytes_per_token(n_layers: int, hidden: int, dtype: str) -> int:
    return (n_layers + 1) * hidden * np.dtype(DTYPES[dtype]).itemsize + 4 + 1 + 4 + 4


def _write_shard(path: Path, seqs: list[Sequence], dtype: str) -> dict:
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    np_dtype = DTYPES[dtype]
    lengths = [len(s.ids) for s in seqs]
    np.save(tmp / "offsets.npy", np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    np.save(tmp / "ids.npy", torch.cat([s.ids for s in seqs]).numpy().astype(np.int32))
    np.save(tmp / "loss_mask.npy", torch.cat([s.loss_mask for s in seqs]).numpy().astype(np.uint8))
    np.save(tmp / "features.npy", torch.cat([s.features for s in seqs]).float().numpy().astype(np_dtype))
    np.save(tmp / "final.npy", torch.cat([s.final for s in seqs]).float().numpy().astype(np_dtype))
    np.save(tmp / "lse.npy", torch.cat([s.lse for s in seqs]).numpy().astype(np.float32))
    np.save(tmp / "greedy.npy", torch.cat([s.greedy for s in seqs]).numpy().astype(np.int32))
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)
    return {"name": path.name, "sequences": len(seqs), "tokens": int(sum(lengths))}


def _digest(pairs: list[tuple[list[int], list[bool]]]) -> str:
    """Identity of the rows a shard was built from (token ids and loss masks)."""
    return hashlib.sha1(json.dumps(pairs).encode()).hexdigest()[:16]


def _manifest_key(target, layers: list[int], dtype: str, max_len: int, keep_all: bool) -> dict:
    return {
        "rows": "all" if keep_all else "with-answer",  # absent in older caches: built with every row
        "target_name": target.name,
        "target_fingerprint": target_fingerprint(target),
        "layers": layers,
        "hidden_size": int(target.model.config.hidden_size),
        "dtype": dtype,
        "max_len": max_len,
    }


def build_cache(
    target,
    answers: str | Path,
    out_dir: str | Path,
    layers: list[int],
    dtype: str = "float16",
    max_len: int = 1024,
    shard_sequences: int = 256,
    limit: int | None = None,
    keep_all: bool = False,
    progress: bool = True,
    confirm=None,
) -> dict:
    """Build (or resume) the cache from regenerated answers. `confirm(bytes)` may veto the size.
    Rows with no answer token inside max_len are left out unless keep_all (learnable_pairs)."""
    if dtype not in DTYPES:
        raise DraftsmithError(f"cache dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    bad = [i for i in layers if not 0 <= i < target.runner.num_layers]
    if bad:
        raise DraftsmithError(f"target has layers 0..{target.runner.num_layers - 1}; cannot cache {bad}")
    out = Path(out_dir)
    key = _manifest_key(target, layers, dtype, max_len, keep_all)
    manifest_path = out / "manifest.json"
    shards: list[dict] = []
    if manifest_path.is_file():
        old = json.loads(manifest_path.read_text())
        if old.get("format") != FORMAT:
            raise DraftsmithError(
                f"{out} holds a {old.get('format', 'foreign')} cache; this version writes {FORMAT}: "
                "build into a new --out directory"
            )
        old = {**OLD_MANIFEST, **old}
        mismatch = {k: (old.get(k), v) for k, v in key.items() if old.get(k) != v}
        if mismatch:
            raise DraftsmithError(
                f"{out} holds a cache built with other settings {mismatch}; use another --out directory"
            )
        shards = old["shards"]
    pairs, dropped = learnable_pairs(target, answers, max_len, limit, keep_all)
    total_tokens = sum(len(ids) for ids, _ in pairs)
    size = total_tokens * bytes_per_token(len(layers), key["hidden_size"], dtype)
    if confirm is not None and not confirm(size, total_tokens, len(pairs)):
        raise DraftsmithError("cache build cancelled")
    out.mkdir(parents=True, exist_ok=True)
    done = 0
    for shard in shards:  # resuming only makes sense over the same leading rows of the same answers
        group = pairs[done : done + shard["sequences"]]
        digest = _digest(group)
        if len(group) < shard["sequences"] or shard.get("digest", digest) != digest:
            raise DraftsmithError(
                f"{out}/{shard['name']} was built from other rows than {answers} now holds at that position; "
                "build this answers file into a new --out directory"
            )
        done += shard["sequences"]
    bar = tqdm(total=len(pairs), initial=done, desc="cache", unit="seq", disable=not progress)
    for start in range(done, len(pairs), shard_sequences):
        group = pairs[start : start + shard_sequences]
        seqs = []
        for ids, mask in group:
            seqs.append(target_sequence(target, ids, mask, layers))
            bar.update()
        shards.append(
            {**_write_shard(out / f"shard-{len(shards):05d}", seqs, dtype), "digest": _digest(group)}
        )
        manifest = {
            "format": FORMAT,
            **key,
            "shards": shards,
            "answers": str(answers),
            "dropped_no_answer": dropped,
            "sequences": sum(s["sequences"] for s in shards),
            "tokens": sum(s["tokens"] for s in shards),
        }
        tmp = manifest_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=1))
        os.replace(tmp, manifest_path)
    bar.close()
    return json.loads(manifest_path.read_text())


class TargetCache:
    """Read side: sequence i as tensors, straight from the memory-mapped shards."""

    def __init__(self, directory: str | Path, target=None) -> None:
        self.dir = Path(directory)
        path = self.dir / "manifest.json"
        if not path.is_file():
            raise DraftsmithError(f"no target cache at {directory} (missing manifest.json)")
        self.manifest = json.loads(path.read_text())
        if self.manifest.get("format") != FORMAT:
            if str(self.manifest.get("format", "")).startswith("draftsmith-cache/"):
                raise DraftsmithError(
                    f"{directory} is a {self.manifest['format']} cache; this version reads {FORMAT} "
                    "(it adds the target's greedy tokens): rebuild it with `draftsmith data cache`"
                )
            raise DraftsmithError(f"{directory} is not a draftsmith target cache")
        if target is not None and self.manifest["target_fingerprint"] != target_fingerprint(target):
            built_for = self.manifest["target_name"]
            raise DraftsmithError(f"cache {directory} was built for {built_for!r}, not {target.name!r}")
        self.layers: list[int] = self.manifest["layers"]
        self.index: list[tuple[int, int]] = []
        self.shards = []
        for s_i, shard in enumerate(self.manifest["shards"]):
            arrays = {
                n: np.load(self.dir / shard["name"] / f"{n}.npy", mmap_mode="r")
                for n in ("offsets", "ids", "loss_mask", "features", "final", "lse", "greedy")
            }
            self.shards.append(arrays)
            self.index.extend((s_i, j) for j in range(shard["sequences"]))

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> Sequence:
        s_i, j = self.index[i]
        a = self.shards[s_i]
        lo, hi = int(a["offsets"][j]), int(a["offsets"][j + 1])
        return Sequence(
            torch.from_numpy(np.array(a["ids"][lo:hi], dtype=np.int64)),
            torch.from_numpy(np.array(a["loss_mask"][lo:hi]).astype(bool)),
            torch.from_numpy(np.array(a["features"][lo:hi], dtype=np.float32)),
            torch.from_numpy(np.array(a["final"][lo:hi], dtype=np.float32)),
            torch.from_numpy(np.array(a["lse"][lo:hi], dtype=np.float32)),
            torch.from_numpy(np.array(a["greedy"][lo:hi], dtype=np.int64)),
        )

    def __iter__(self) -> Iterator[Sequence]:
        return (self[i] for i in range(len(self)))

    def token_counts(self, vocab: int) -> np.ndarray:
        """How often each target token appears in the learned (answer) part: for the draft vocabulary."""
        counts = np.zeros(vocab, dtype=np.int64)
        for a in self.shards:
            ids = np.asarray(a["ids"])[np.asarray(a["loss_mask"]).astype(bool)]
            counts += np.bincount(ids, minlength=vocab)[:vocab]
        return counts


class OnlineData:
    """The same interface as TargetCache, computing target states on the fly (when disk is short).

    Costs one target forward per sequence per use instead of disk space.
    """

    def __init__(
        self, target, answers: str | Path, layers: list[int], max_len: int = 1024, keep_all: bool = False
    ) -> None:
        self.target, self.layers = target, list(layers)
        self.pairs, _ = learnable_pairs(target, answers, max_len, keep_all=keep_all)

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> Sequence:
        ids, mask = self.pairs[i]
        return target_sequence(self.target, ids, mask, self.layers)

    def token_counts(self, vocab: int) -> np.ndarray:
        counts = np.zeros(vocab, dtype=np.int64)
        for ids, mask in self.pairs:
            learned = [t for t, m in zip(ids, mask, strict=True) if m and t < vocab]
            counts += np.bincount(learned, minlength=vocab)[:vocab]
        return counts
