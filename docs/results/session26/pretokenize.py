"""Issue 8, session 26: token ids for the GPU job (whose machine has no tokenizer data or prompt packages).

Writes, for `gpu_job.py`:
  OUT1/seqs.npz     every committed training answer as the trainer sees it (tokenize_row: the
                    target's own answer ids, EOS only after an answer that ended), max_len 1024
  OUT1/heldout.npz  the 120 bench-shaped dev answers (session 24) and the 64 training-mix held-out ones
  OUT2/prompts.npz  chat-formatted prompt ids to regenerate, in priority order
  OUT2/prompts.jsonl.gz  the same prompts as text (kept here: the answers are joined back to them)
Usage: python pretokenize.py PROMPTS_TRAIN_JSONL OUT1 OUT2 [MAX_PROMPT_TOKENS]
"""

import gzip
import json
import random
import sys
from pathlib import Path

import numpy as np

from draftsmith.models.target import Target
from draftsmith.training.cache import tokenize_row
from draftsmith.training.regenerate import iter_pairs

DATA = Path("data/smollm2")
TRAIN = ["answers-train-t07", "answers-train-t0", "answers-complete-train-t0"]
TRAIN += sorted(p.name.removesuffix(".jsonl.gz") for p in DATA.glob("answers-train-t07-gpu-*.jsonl.gz"))
"""The committed training answers; a GPU run's answers (after_gpu.sh) join them."""


def pack(pairs: list[tuple[list[int], list[bool]]]) -> dict[str, np.ndarray]:
    lengths = [len(ids) for ids, _ in pairs]
    return {
        "ids": np.array([t for ids, _ in pairs for t in ids], dtype=np.uint16),
        "mask": np.array([m for _, ms in pairs for m in ms], dtype=np.uint8),
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
    }


def sequences(target, path: Path, limit: int | None = None) -> list:
    pairs = [tokenize_row(target, r, 1024) for r in iter_pairs(path)][:limit]
    return [(ids, m) for ids, m in pairs if any(m)]


def main(prompts_path: str, out1: str, out2: str, max_prompt: int = 768) -> None:
    target = Target.load(dtype="float32", calibrate=False)
    assert target.runner.vocab_size <= 65535
    o1, o2 = Path(out1), Path(out2)
    pairs, seen = [], set()
    for name in TRAIN:
        pairs += sequences(target, DATA / f"{name}.jsonl.gz")
        seen |= {r["prompt"] for r in iter_pairs(DATA / f"{name}.jsonl.gz")}
    train = pack(pairs)
    np.savez_compressed(o1 / "seqs.npz", **train)
    dev = sequences(target, Path("docs/results/session24/dev/answers.jsonl.gz"))
    held = sequences(target, DATA / "answers-held-out-t0.jsonl.gz", 64)
    np.savez_compressed(o1 / "heldout.npz", **{f"dev_{k}": v for k, v in pack(dev).items()},
                        **{f"ho_{k}": v for k, v in pack(held).items()})
    held_prompts = {r["prompt"] for f in ("answers-held-out-t0", "answers-complete-held_out-t0")
                    for r in iter_pairs(DATA / f"{f}.jsonl.gz")}
    rows = [json.loads(line) for line in open(prompts_path)]
    # completion prompts (humaneval's shape) come from the committed answers' own prompts
    rows += [{"id": r["id"], "category": "complete", "prompt": r["prompt"]}
             for r in iter_pairs(DATA / "answers-complete-train-t0.jsonl.gz")]
    rows = [r for r in rows if r["prompt"] not in held_prompts]
    rng = random.Random(26)
    first = [r for r in rows if r["category"] != "math"]
    maths = [r for r in rows if r["category"] == "math"]
    rng.shuffle(first)
    rng.shuffle(maths)
    keep, ids = [], []
    # prompts never answered first (stable: the priority order holds within each group), so a second
    # GPU run answers new prompts before it samples a second answer to an old one
    for r in sorted(first + maths, key=lambda r: r["prompt"] in seen):
        p = target.encode(r["prompt"])
        if len(p) <= max_prompt:
            keep.append({**r, "answered_before": r["prompt"] in seen})
            ids.append((p, [False] * len(p)))
    packed = pack(ids)
    np.savez_compressed(o2 / "prompts.npz", ids=packed["ids"], offsets=packed["offsets"])
    with gzip.open(o2 / "prompts.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in keep)
    n_ans = int(train["mask"].sum())
    print(f"train sequences {len(pairs)} ({n_ans} learned tokens); dev {len(dev)}, held-out {len(held)}; "
          f"prompts {len(keep)} (non-math {sum(r['category'] != 'math' for r in keep)}, "
          f"answered before {sum(r['answered_before'] for r in keep)})")


if __name__ == "__main__":
    main(*sys.argv[1:4], *[int(x) for x in sys.argv[4:5]])
