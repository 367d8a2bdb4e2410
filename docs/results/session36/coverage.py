"""Issue 8, session 36: how much of what the target writes lies inside the shipped DSpark's draft
vocabulary, and how much a vocabulary widened with the most frequent tokens of the committed training
answers would cover. A token outside the draft vocabulary can never be drafted right.

Usage: python docs/results/session36/coverage.py [DEV_ANSWERS]   (from the repository root)
  bench outputs: plain decoding's tokens in session 35's bench (first repeat);
  DEV_ANSWERS: the dev set's answers (default /tmp/dev/all-answers.jsonl, from
  docs/results/session24/dev/answers.jsonl.gz).
"""

import collections
import glob
import gzip
import json
import sys

import numpy as np
from safetensors.torch import load_file

VOCAB = 49152
SHIPPED = "draftsmith/drafters/pretrained/smollm2-dspark/model.safetensors"


def share(tokens: list[int], vocab: set[int]) -> str:
    return f"{np.mean([t in vocab for t in tokens]):.3f}"


def main() -> None:
    dev_path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/dev/all-answers.jsonl"
    d2t = set(load_file(SHIPPED)["d2t"].tolist())
    counts = np.zeros(VOCAB, dtype=np.int64)
    for path in glob.glob("data/smollm2/answers-*train*.jsonl.gz"):
        for line in gzip.open(path, "rt"):
            counts += np.bincount(json.loads(line)["answer_ids"], minlength=VOCAB)[:VOCAB]
    print("training tokens", counts.sum(), "distinct", (counts > 0).sum())
    order = np.argsort(-counts)
    records = json.load(gzip.open("docs/results/session35/bench/bench.json.gz"))["records"]
    suites: dict[str, list[int]] = collections.defaultdict(list)
    for rec in records:
        if rec["method"] == "plain" and rec["repeat"] == 0:
            suites[rec["suite"]] += rec["tokens"]
    with open(dev_path) as f:
        suites["dev"] = [t for line in f for t in json.loads(line)["answer_ids"]]
    print("N", "size", *suites)
    print("shipped", len(d2t), *[share(v, d2t) for v in suites.values()])
    for n in (8192, 12288, 16384, 24576, 32768):
        vocab = set(order[:n].tolist()) | d2t  # the shipped tokens plus the n most frequent
        print(n, len(vocab), *[share(v, vocab) for v in suites.values()])


if __name__ == "__main__":
    main()
