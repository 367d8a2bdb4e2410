"""Issue 8, session 26: widen a trained DSpark's draft vocabulary without training it.

The draft head is the target's own frozen lm_head, restricted to the draft vocabulary, so a token
added to that vocabulary already has a head row. What it lacks is a trained Markov-bias row
(`markov_out`, started at zero here, as training starts it) and its own Markov-input row (it
keeps the shared out-of-vocabulary row it used before). Does the frozen head alone draft the
added tokens right on the suites whose tokens the 8,192 vocabulary misses (alpaca 11%, mtbench 6%)?
Tokens are added in order of frequency in the committed training answers.
Usage: .venv/bin/python docs/results/session26/widen_vocab.py SRC_DIR OUT_DIR N
"""

import collections
import gzip
import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

src, out, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
w = load_file(src / "model.safetensors")
cfg = json.loads((src / "config.json").read_text())
if cfg.get("markov_vocab", "draft") != "draft":
    sys.exit("only drafters with draft-vocabulary Markov rows are handled")
old = w["d2t"].tolist()
vd = len(old)
if n <= vd:
    sys.exit(f"N must exceed the current draft vocabulary ({vd})")
counts: collections.Counter = collections.Counter()
for f in ("answers-train-t0", "answers-train-t07", "answers-complete-train-t0"):
    for line in gzip.open(f"data/smollm2/{f}.jsonl.gz", "rt"):
        counts.update(json.loads(line)["answer_ids"])
have = set(old)
order = [t for t, _ in counts.most_common() if t not in have]
seen = have | set(order)
order += [t for t in range(cfg["target_vocab_size"]) if t not in seen]
added = order[: n - vd]
w["d2t"] = torch.tensor(old + added, dtype=torch.long)
mo = w["markov_out.weight"]
w["markov_out.weight"] = torch.cat([mo, torch.zeros(len(added), mo.shape[1], dtype=mo.dtype)])
mi = w["markov_in.weight"]  # rows: vd draft tokens, then the shared out-of-vocabulary row
oov = mi[vd:]
w["markov_in.weight"] = torch.cat([mi[:vd], oov.expand(len(added), -1), oov])
cfg["draft_vocab_size"] = n
out.mkdir(parents=True, exist_ok=True)
save_file({k: v.contiguous() for k, v in w.items()}, out / "model.safetensors")
(out / "config.json").write_text(json.dumps(cfg, indent=1))
for extra in src.iterdir():
    if extra.name not in ("model.safetensors", "config.json") and extra.is_file():
        shutil.copy(extra, out / extra.name)
print(f"{src} -> {out}: draft vocabulary {vd} -> {n} ({len(added)} tokens added)")
