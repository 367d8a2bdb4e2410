"""The load-curve plot (per-user p50 against total tok/s, one curve per arm, points labelled with
the number of users) from a multi_user.py run: medians over its rounds, as its table reports.
Usage: python docs/results/session12/plot_multi_user.py MULTI_USER.json OUT.png"""

import json
import statistics
import sys

from draftsmith.serving.loadtest import plot

LABELS = {"plain": "plain", "dspark": "DSpark, confidence-scheduled", "dspark-fixed": "DSpark, fixed k=7"}
rows = json.load(open(sys.argv[1]))["rows"]
reports = []
for arm in dict.fromkeys(r["arm"] for r in rows):
    levels = []
    for users in sorted({r["users"] for r in rows if r["arm"] == arm}):
        mine = [r for r in rows if r["arm"] == arm and r["users"] == users]
        levels.append(
            {
                "concurrency": users,
                "total_tok_s": statistics.median(r["total_tok_s"] for r in mine),
                "per_user_tok_s_p50": statistics.median(r["per_user_p50"] for r in mine),
            }
        )
    reports.append({"model": arm, "label": LABELS.get(arm, arm), "levels": levels})
print("written" if plot(reports, sys.argv[2]) else "matplotlib missing")
