"""The held-out prompts session 19's tau scripts decode: n greedy held-out answers of at least `new`
tokens, the categories taken in turn (chat, code, instruction, math, chat, ...)."""

import gzip
import json


def held_out_rows(n: int, new: int) -> list[dict]:
    rows = [json.loads(line) for line in gzip.open("data/smollm2/answers-held-out-t0.jsonl.gz", "rt")]
    by_cat: dict[str, list[dict]] = {}
    for r in rows:
        if r["new_tokens"] >= new:
            by_cat.setdefault(r["category"], []).append(r)
    cats = sorted(by_cat)
    return [by_cat[c][i // len(cats)] for i, c in zip(range(n), cats * n, strict=False)]
