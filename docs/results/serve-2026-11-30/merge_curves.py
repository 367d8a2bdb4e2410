"""Merge serve_bench.sh's per-level loadtest JSONs into one curve per server; print the tables and
plot per-user speed against total throughput (DIR/curves.png)."""

import json
import sys
from pathlib import Path

from draftsmith.serving.loadtest import markdown, plot

D = Path(sys.argv[1])
reports = []
for name in ["plain", "dspark-fixed", "dspark-confidence", "ngram"]:
    parts = [D / f"{name}-c{c}.json" for c in (1, 2, 4, 8, 16, 32)]
    parts = [json.loads(p.read_text()) for p in parts if p.exists()]
    if not parts:
        continue
    report = dict(parts[0], label=name, levels=[lv for p in parts for lv in p["levels"]])
    (D / f"{name}.json").write_text(json.dumps(report, indent=1))
    print(f"### {name}\n" + markdown(report))
    reports.append(report)
plot(reports, D / "curves.png")
