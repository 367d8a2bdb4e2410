"""Which committed answers the shipped drafters have trained on, and which remain unseen.

Rebuilds every stage of the shipped lineage (both drafters saw the same rows since session 39) from
the slice specs its scripts used (mix_answers.py's rule: NAME:START:STEP:N[:CATEGORY]), then prints
the unseen rows and answer tokens per file and category; SPEC arguments are checked for overlap with
the used rows (and each other) and counted.
Usage: python docs/results/session41/unseen_answers.py [SPEC ...]
Session 41's "mix A" (continue_mix_a.sh; not shipped, so still unseen by the shipped pair) takes all
433 unseen math rows; a disjoint "mix B" for the next continuation (1,123 rows, 308k answer tokens of
completion, code and chat, checked with this script): answers-complete-train-t0:1523:4:300
answers-complete-train-t0:1202:4:300 answers-train-t07-gpu-20261204:5:6:100:complete
answers-train-t07-gpu-20261204:5:6:250:code answers-train-t07:3888:2:200:code
answers-train-t07-gpu-20261204:5:6:200:chat
"""

import gzip
import json
import sys
from collections import Counter

FILES = (
    "answers-train-t07",
    "answers-train-t0",
    "answers-train-t07-gpu-20261204",
    "answers-complete-train-t0",
)
STAGES = {  # stage: its slices (the 4,000-step start: data cache --limit 3887 over t07 then t0)
    "sessions 19-20, 4,000 steps": ["answers-train-t07:0:1:3887"],
    "session 33 (finetune_lookup.sh)": ["answers-train-t0:0:9:500", "answers-train-t07-gpu-20261204:0:6:500"],
    "session 34 (continue_regrow.sh)": ["answers-train-t0:4:9:500", "answers-train-t07-gpu-20261204:3:6:500"],
    "session 35 (continue_complete.sh)": ["answers-complete-train-t0:1:4:450", "answers-train-t0:2:9:550"],
    "session 38 (continue_unseen.sh)": [
        "answers-complete-train-t0:0:4:400",
        "answers-train-t0:1:9:400",
        "answers-train-t07-gpu-20261204:1:6:400",
        "answers-train-t07:3887:2:300",
    ],
    "session 38 (continue_math_code.sh)": [
        "answers-train-t0:3:9:400:math",
        "answers-train-t0:5:9:400:math",
        "answers-train-t0:7:9:400:math",
        "answers-train-t0:6:9:400:code",
        "answers-train-t0:8:9:400:chat",
        "answers-train-t07:3888:2:400:math",
        "answers-complete-train-t0:2:4:300",
    ],
    "session 40 (rebuild_ship.sh)": ["answers-train-t07-gpu-20261204:2:6:600"],
}
rows = {n: [json.loads(line) for line in gzip.open(f"data/smollm2/{n}.jsonl.gz", "rt")] for n in FILES}


def pick(spec: str) -> tuple[str, list[int]]:
    name, start, step, n, *category = spec.split(":")
    idx = list(range(len(rows[name])))[int(start) :: int(step)]
    if category:
        idx = [i for i in idx if rows[name][i]["category"] == category[0]]
    return name, idx[: int(n)]


def kind(name: str, row: dict) -> str:  # the completion file labels its rows "code"
    return "complete" if name == "answers-complete-train-t0" else row["category"]


used: dict[str, set[int]] = {n: set() for n in FILES}
for specs in STAGES.values():
    for spec in specs:
        name, idx = pick(spec)
        used[name] |= set(idx)
unseen: Counter = Counter()
for name in FILES:
    for i, row in enumerate(rows[name]):
        if i not in used[name]:
            unseen[name, kind(name, row), "rows"] += 1
            unseen[name, kind(name, row), "tokens"] += row["new_tokens"]
print(f"used: {sum(map(len, used.values()))} rows; unseen rows / answer tokens:")
for name in FILES:
    cells = {
        c: (unseen[name, c, "rows"], unseen[name, c, "tokens"])
        for k, c, w in unseen
        if k == name and w == "rows"
    }
    print(f"  {name}: " + ", ".join(f"{c} {r} / {t}" for c, (r, t) in sorted(cells.items())))
taken: dict[str, set[int]] = {n: set() for n in FILES}
for spec in sys.argv[1:]:
    name, idx = pick(spec)
    clash = (used[name] | taken[name]) & set(idx)
    taken[name] |= set(idx)
    tokens = sum(rows[name][i]["new_tokens"] for i in idx)
    print(f"{spec}: {len(idx)} rows, {tokens} answer tokens, {len(clash)} already used or taken")
