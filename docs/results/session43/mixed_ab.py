"""Mixed step shapes against the single 4-row shape, A/B in one process: the same prompts decoded by
plain and by each METHOD in every mode, alternating per prompt, repeated; prints tok/s, tau, drafting
and verifying per suite and arm, and checks that every output equals plain decoding's.
Usage: python docs/results/session43/mixed_ab.py [METHODS] [N_PROMPTS_PER_SUITE] [REPEATS] [SUITES] [MODES]
(METHODS comma-separated, e.g. dspark,dflash; MODES: fixed4, mixed2, mixed4, comma-separated)
"""

import statistics
import sys

from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.evaluation.suites import load_suite
from draftsmith.models.target import Target

methods = (sys.argv[1] if len(sys.argv) > 1 else "dspark").split(",")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 3
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 2
suites = (sys.argv[4] if len(sys.argv) > 4 else "gsm,humaneval").split(",")
target = Target.load(None, fixed_rows=4)
runner = target.runner
prompts = [(s, target.encode(p.text, chat=p.chat)) for s in suites for p in load_suite(s, n)]
drafters = {"plain": build_drafter("plain", target)} | {m: build_drafter(m, target) for m in methods}


def mode(name: str) -> None:
    """fixed4: today's single shape; mixed2 / mixed4: mixed shapes, short steps run as 2 / 4 rows;
    mixed4p: mixed4 with the draft-length rules pricing every step row past 4 at 2.5% of a 4-row step
    (a long step priced as the in-decoding timings read it, not the calibrated table)."""
    if name == "fixed4":
        runner.set_fixed_rows(4)
        return
    assert runner.set_mixed_rows(16, int(name[5])), "mixed shapes are not exact on this machine"
    if name.endswith("p"):
        c4 = runner.step_cost[4]
        runner.step_cost = {n: max(c, c4 * (1 + 0.025 * (n - 4))) for n, c in runner.step_cost.items()}


modes = tuple(sys.argv[5].split(",")) if len(sys.argv) > 5 else ("fixed4", "mixed2", "mixed4")
# plain decoding runs as the same 4-row steps in every mode here, so it is timed once, in the first
arms = [(modes[0], "plain")] + [(m, d) for m in modes for d in drafters if d != "plain"]
outs: dict[tuple, dict] = {}
rec: dict[tuple, dict] = {}
for _s, ids in prompts[:1]:  # warm-up
    for m, d in arms:
        mode(m)
        speculative_generate(runner, drafters[d], ids, target.stop_rule(128))
for r in range(repeats):
    for i, (suite, ids) in enumerate(prompts):
        order = arms if (i + r) % 2 == 0 else list(reversed(arms))
        for m, d in order:
            mode(m)
            res = speculative_generate(runner, drafters[d], ids, target.stop_rule(128))
            for key in ((m, d, suite), (m, d, "all")):
                a = rec.setdefault(key, {"tok_s": [], "tokens": 0, "rounds": 0, "draft_s": 0, "verify_s": 0})
                a["tok_s"].append(res.stats.new_tokens / res.stats.total_s)
                a["tokens"] += res.stats.new_tokens
                a["rounds"] += res.stats.rounds
                a["draft_s"] += res.stats.draft_s
                a["verify_s"] += res.stats.verify_s
            if r == 0:
                outs.setdefault((m, d), {})[i] = res.tokens
ref = outs[(modes[0], "plain")]
print(f"{','.join(methods)}: {len(prompts)} prompts ({','.join(suites)}) x {repeats} repeats, 128 tokens")
for (m, d), o in outs.items():
    print(f"{m} {d}: identical to plain ({modes[0]}) {sum(o[i] == ref[i] for i in ref)}/{len(ref)}")
print("| suite | mode | method | tok/s, median | x plain | tau | drafting / verify ms a round |")
print("|---|---|---|---|---|---|---|")
for suite in suites + ["all"]:
    base = statistics.median(rec[(modes[0], "plain", suite)]["tok_s"])
    for m, d in arms:
        a = rec[(m, d, suite)]
        med = statistics.median(a["tok_s"])
        ms = f"{1000 * a['draft_s'] / a['rounds']:.2f} / {1000 * a['verify_s'] / a['rounds']:.2f}"
        tau = a["tokens"] / a["rounds"]
        print(f"| {suite} | {m} | {d} | {med:.1f} | {med / base:.2f}x | {tau:.2f} | {ms} |")
