"""Compare training runs: the settings that differ between them and their held-out acceptance.

Every `draftsmith train` run leaves `train_config.json` and `train_log.jsonl` in its directory; this
reads them back into one table, so a recipe A/B is one command to reproduce and one to report.
"""

from __future__ import annotations

import json
from pathlib import Path

from draftsmith.errors import DraftsmithError

METRICS = ("held_out_tau_greedy", "held_out_tau_greedy_k3", "held_out_tau", "tau_est", "ce")


def load_run(directory: str | Path) -> dict:
    d = Path(directory)
    cfg_path, log_path = d / "train_config.json", d / "train_log.jsonl"
    if not cfg_path.is_file() or not log_path.is_file():
        raise DraftsmithError(f"{d} is not a training run (needs train_config.json and train_log.jsonl)")
    log = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    if not log:
        raise DraftsmithError(f"{log_path} is empty")
    return {"name": d.name, "config": json.loads(cfg_path.read_text()), "log": log}


def runs_table(dirs: list[str | Path]) -> str:
    """Markdown: run, the settings that differ across runs, step-0 and last metrics, wall time."""
    runs = [load_run(d) for d in dirs]
    keys = sorted({k for r in runs for k in r["config"]})
    varying = [k for k in keys if len({json.dumps(r["config"].get(k)) for r in runs}) > 1 and k != "seed"]
    evals = [[row for row in r["log"] if "held_out_tau" in row] for r in runs]
    head = ["run", *varying, "steps", "ce at step 0", *METRICS[:3], "wall s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r, ev in zip(runs, evals, strict=True):
        last = ev[-1] if ev else {}
        cells = [r["name"], *(str(r["config"].get(k)) for k in varying)]
        cells += [str(r["log"][-1]["step"]), f"{r['log'][0].get('ce', float('nan')):.2f}"]
        cells += [f"{last[m]:.3f}" if m in last else "-" for m in METRICS[:3]]
        cells.append(str(r["log"][-1].get("seconds", "-")))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def curve(directory: str | Path, metric: str = "held_out_tau_greedy") -> list[tuple[int, float]]:
    """(step, metric) at every held-out evaluation of a run."""
    return [(row["step"], row[metric]) for row in load_run(directory)["log"] if metric in row]
