"""Issue 8, session 25: what share of the dev answers' tokens a draft vocabulary can propose at all.

A token outside the drafter's vocabulary is never drafted, so its share caps acceptance. Prints the
shipped DSpark's coverage per suite, then that of the top-N most frequent tokens of the committed
training answers (how `train` picks the draft vocabulary, here from all committed answers).
Usage: .venv/bin/python docs/results/session25/vocab_coverage.py
"""

import collections
import gzip
import json

from safetensors import safe_open

SUITES = ("humaneval", "mtbench", "gsm", "alpaca")
rows = [json.loads(x) for x in gzip.open("docs/results/session24/dev/answers.jsonl.gz", "rt")]
ids = {s: [t for r in rows if r["category"] == s for t in r["answer_ids"]] for s in SUITES}


def coverage(vocab: set[int]) -> str:
    return " / ".join(f"{sum(t in vocab for t in ids[s]) / len(ids[s]):.4f}" for s in SUITES)


shipped = "draftsmith/drafters/pretrained/smollm2-dspark/model.safetensors"
print("shipped DSpark (8,192):", coverage(set(safe_open(shipped, "pt").get_tensor("d2t").tolist())))
counts: collections.Counter = collections.Counter()
for f in ("answers-train-t0", "answers-train-t07", "answers-complete-train-t0"):
    for line in gzip.open(f"data/smollm2/{f}.jsonl.gz", "rt"):
        counts.update(json.loads(line)["answer_ids"])
order = [t for t, _ in counts.most_common()]
print(f"distinct tokens in the committed training answers: {len(order)}")
for n in (8192, 12288, 16384, len(order)):
    print(f"top {n}:", coverage(set(order[:n])))
print("suites:", " / ".join(SUITES), f"(dev answer tokens: {' / '.join(str(len(ids[s])) for s in SUITES)})")
