"""The six-method table (README and BENCHMARKS) from one bench run and the training runs' logs.
Usage: python docs/results/six-methods/table.py BENCH_JSON LONG_DIR
(LONG_DIR holds one training run per method, as docs/results/train-long.sh writes them.)

Training wall time is the median seconds per logged step times the steps: the runs were paused
and resumed across sessions, so their logged totals include pauses; the median step does not."""

import json
import statistics
import sys
from pathlib import Path

TRAINED = {"draft-model": "distilled", "distilled": "distilled", "eagle3": "eagle3", "mtp": "mtp"}
TRAINED |= {"medusa": "medusa"}
TRAINED |= {"dflash": "dflash", "dspark": "dspark", "hybrid": "dspark"}
SUITES = ["humaneval", "mtbench", "gsm", "alpaca"]
WHAT_DRAFTS = {  # the seeds' selection table, column "what drafts" (../shared/REFERENCE.md section 2)
    "plain": "nothing (the baseline)",
    "ngram": "suffix match in prompt + output",
    "draft-model": "a small LM with the target's tokenizer (4 of its 30 layers, distilled)",
    "eagle3": "1 layer on fused low/mid/high target states, token by token",
    "mtp": "1 block on the last target state + next token's embedding, token by token",
    "dflash": "1 layer, one parallel pass for a block of 7",
    "dspark": "DFlash's block + serial Markov head + confidence head",
    "hybrid": "n-gram on a long match, DSpark otherwise",
    "medusa": "K residual heads on the last target state, one parallel pass",
}

WHERE_IT_FITS = {  # the seeds' selection table, column "notes" (REFERENCE.md section 2), shortened
    "plain": "",
    "ngram": "copy-heavy text (code edits, RAG); weak elsewhere",
    "draft-model": "simple; costs a full small model per step",
    "eagle3": "per target; drafts token by token",
    "mtp": "best on GPU when the vendor ships it",
    "dflash": "per target; one parallel pass per block",
    "dspark": "per target; DeepSeek runs it in production",
    "hybrid": "draftsmith's: n-gram where the text repeats",
    "medusa": "not in the seeds' table; all drafts in one pass",
}


def where_it_fits(m: str, speeds: dict[str, float]) -> str:
    """The seeds' note, then where it ran fastest in this bench (measured)."""
    note = WHERE_IT_FITS.get(m, "")
    if m == "plain" or not speeds:
        return note
    best = max(speeds, key=speeds.get)
    return f"{note}; here best on {best} ({speeds[best]:.2f}x)" if note else f"here best on {best}"


def training_cost(run: Path) -> str:
    """Steps, median seconds per step x steps, held-out greedy tau, drafter size on disk."""
    rows = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines() if line.strip()]
    pairs = zip(rows, rows[1:], strict=False)
    step_s = [b["seconds"] - a["seconds"] for a, b in pairs if b["step"] == a["step"] + 1]
    steps = rows[-1]["step"]
    held = [r["held_out_tau_greedy"] for r in rows if "held_out_tau_greedy" in r]
    size = sum(f.stat().st_size for f in run.glob("*.safetensors")) / 1e6
    minutes = statistics.median(step_s) * steps / 60
    tau = f", held-out tau {held[-1]:.2f}" if held else ""
    return f"{steps} steps, ~{minutes:.0f} min{tau}, {size:.1f} MB"


def main(bench: str, long_dir: str) -> None:
    data = json.loads(Path(bench).read_text())
    by = {(s["suite"], s["method"]): s for s in data["summaries"]}
    methods = data["config"]["methods"]
    print("| method | what drafts | training here (2 cores) | tau (all) | acc@1 / @2 / @3 (all) |", end="")
    print(" speedup " + " / ".join(SUITES) + " | all | identical to plain | where it fits |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m in methods:
        run = Path(long_dir) / TRAINED[m] if m in TRAINED else None
        cost = training_cost(run) if run and (run / "train_log.jsonl").exists() else "none"
        every = by.get(("all", m))
        tau = f"{every['tau']:.2f}" if every and every["tau"] else "-"
        acc = " / ".join(f"{a:.2f}" for a in (every or {}).get("acceptance_by_position", [])[:3]) or "-"
        speeds = {s: by[(s, m)]["speedup_median"] or 1.0 for s in SUITES if (s, m) in by}
        speed = " / ".join(f"{speeds[s]:.2f}x" if s in speeds else "-" for s in SUITES)
        total = f"{every['speedup_median'] or 1.0:.2f}x" if every else "-"
        same = sum(by[(s, m)]["identical"] for s in SUITES if (s, m) in by)
        prompts = sum(by[(s, m)]["prompts"] for s in SUITES if (s, m) in by)
        what = WHAT_DRAFTS.get(m, "")
        fits = where_it_fits(m, speeds)
        print(f"| {m} | {what} | {cost} | {tau} | {acc} | {speed} | {total} | {same}/{prompts} | {fits} |")


if __name__ == "__main__":
    main(*sys.argv[1:3])
