"""STS with and without the logit bias, on the same decoding rounds (issue 8's shipped DSpark):
decode the held-out prompts once (as `draftsmith sts` does: greedy, fixed-length drafts), fit on
the even prompts, report ECE on the odd ones both ways, then store the fit with bias on all
prompts next to the drafter (what `draftsmith sts` now writes).
Usage: python docs/results/session20/sts_bias.py [prompts] [max_new_tokens] [drafter dir]"""

import sys
from pathlib import Path

from draftsmith.api import load_target
from draftsmith.drafters.dflash.drafter import shipped_drafter
from draftsmith.drafters.registry import build_drafter
from draftsmith.evaluation.sts import collect, fit, held_out_prompts, report, save

n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
new = int(sys.argv[2]) if len(sys.argv) > 2 else 96
target = load_target()
where = Path(sys.argv[3]) if len(sys.argv) > 3 else shipped_drafter("dspark", target)
drafter = build_drafter("dspark", target, drafter=str(where))
ids = [target.encode(p, chat=True) for p in held_out_prompts(None, n)]
rounds = [collect(target, drafter, [x], new) for x in ids]
fit_on = [r for i, rs in enumerate(rounds) if i % 2 == 0 for r in rs]
test = [r for i, rs in enumerate(rounds) if i % 2 == 1 for r in rs]
total = sum(map(len, rounds))
print(f"{where}: {n} held-out prompts, {new} tokens, {total} rounds; fit on even, report on odd")
print("| fit | position | rounds | accepted | T | b | mean survival before -> after | ECE before -> after |")
print("|---|---|---|---|---|---|---|---|")
for name, bias in (("temperature only (paper STS)", False), ("temperature + bias", True)):
    for r in report(test, *fit(fit_on, bias=bias)):
        print(
            f"| {name} | {r['position']} | {r['rounds']} | {r['prefix_accept_rate']:.3f} | "
            f"{r['temperature']} | {r['bias']} | "
            f"{r['mean_survival_before']:.3f} -> {r['mean_survival_after']:.3f} | "
            f"{r['ece_before']:.3f} -> {r['ece_after']:.3f} |"
        )
temps, biases = fit([r for rs in rounds for r in rs])
held = report(test, *fit(fit_on))
meta = {"prompts": n, "rounds": total, "max_new_tokens": new, "held_out_report": held}
print(f"fit on all: T = {temps}, b = {biases}; wrote {save(where, temps, meta, biases)}")
