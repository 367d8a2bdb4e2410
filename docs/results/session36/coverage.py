import gzip, json, collections, glob
import numpy as np
from safetensors.torch import load_file
d2t = set(load_file("draftsmith/drafters/pretrained/smollm2-dspark/model.safetensors")["d2t"].tolist())
cnt = np.zeros(49152, dtype=np.int64)
for f in glob.glob("data/smollm2/answers-*train*.jsonl.gz"):
    for line in gzip.open(f, "rt"):
        r = json.loads(line); cnt += np.bincount(r["answer_ids"], minlength=49152)[:49152]
print("training tokens", cnt.sum(), "distinct", (cnt > 0).sum())
order = np.argsort(-cnt)
recs = json.load(gzip.open("docs/results/session35/bench/bench.json.gz"))["records"]
toks = collections.defaultdict(list)
for r in recs:
    if r["method"] == "plain" and r["repeat"] == 0: toks[r["suite"]] += r["tokens"]
dev = [json.loads(l)["answer_ids"] for l in open("/tmp/dev/all-answers.jsonl")]
devt = [t for a in dev for t in a]
print("N", *toks, "dev")
print("shipped", *[f"{np.mean([t in d2t for t in v]):.3f}" for v in toks.values()], f"{np.mean([t in d2t for t in devt]):.3f}")
for N in (8192, 12288, 16384, 24576, 32768):
    S = set(order[:N].tolist()) | d2t
    print(N, len(S), *[f"{np.mean([t in S for t in v]):.3f}" for v in toks.values()], f"{np.mean([t in S for t in devt]):.3f}")
