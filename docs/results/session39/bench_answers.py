"""Turn a bench run's plain-decoding outputs into an answers file (`data regenerate`'s rows), so a
drafter can be scored teacher-forced on exactly the answers the bench decoded.
Usage: python docs/results/session39/bench_answers.py BENCH_JSON[.gz] OUT.jsonl
(then `draftsmith data cache --answers OUT.jsonl --out CACHE --dtype float32 --fixed-rows 0`)
"""

import gzip
import json
import sys

from draftsmith.evaluation.suites import load_suite
from draftsmith.models.target import Target

src, out = sys.argv[1], sys.argv[2]
d = json.load(gzip.open(src) if src.endswith(".gz") else open(src))
target = Target.load(None)
eos = set(target.eos_ids)
limit = d["config"].get("limit") or 10
texts = {(s, p.id): p.text for s in d["config"]["suites"] for p in load_suite(s, limit)}
with open(out, "w") as f:
    for r in d["records"]:
        if r["method"] != "plain" or r["repeat"] != 0:
            continue
        toks, finish = r["tokens"], "length"
        if toks and toks[-1] in eos:
            toks, finish = toks[:-1], "eos"
        row = {
            "id": r["prompt_id"],
            "category": r["suite"],
            "prompt": texts[(r["suite"], r["prompt_id"])],
            "answer": target.tokenizer.decode(toks),
            "answer_ids": toks,
            "finish_reason": finish,
            "eos_id": min(eos),
        }
        f.write(json.dumps(row) + "\n")
