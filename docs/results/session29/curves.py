"""Issue 8, session 29: the held-out curves of the first GPU run (five trainers sharing one H200).

Reads runs/train-log-gpu-*.jsonl.gz (each trainer's log as it came back from the device) and prints,
per trainer, every evaluation row: step, seconds, answer tokens seen, held-out tau against the
target's greedy answers on the bench-shaped dev set (120 answers) and on 64 training-mix held-out
answers (64 anchors each, the package's teacher-forced evaluation).
Usage: python docs/results/session29/curves.py
"""

import gzip
import json
from pathlib import Path

RUNS = Path(__file__).resolve().parent / "runs"


def main() -> None:
    print("| trainer | step | seconds | answer tokens seen | dev tau (greedy) | held-out tau (greedy) |")
    print("|---|---|---|---|---|---|")
    for p in sorted(RUNS.glob("train-log-gpu-*.jsonl.gz")):
        name = p.name.removeprefix("train-log-gpu-").removesuffix(".jsonl.gz")
        rows = [json.loads(x) for x in gzip.open(p, "rt")]
        for r in rows:
            if "dev_tau_greedy" in r:
                print(f"| {name} | {r['step']} | {r['seconds']:.0f} | {r['answer_tokens_seen']:,} "
                      f"| {r['dev_tau_greedy']:.3f} | {r['ho_tau_greedy']:.3f} |")
        last = rows[-1]
        print(f"| {name} (last step) | {last['step']} | {last['seconds']:.0f} | "
              f"{last['answer_tokens_seen']:,} | | |")


if __name__ == "__main__":
    main()
