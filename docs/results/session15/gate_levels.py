"""Issue 9: the drafting gate across load levels, in process, as the load test drives a server.
One confidence-scheduled DSpark decoder with a 32-slot cache (as `serve --max-batch 32` keeps one for
its whole life) runs the levels LEVELS in turn for ROUNDS rounds, each level 2 x users requests
of 64 tokens with at most `users` running at once; a plain decoder runs the same requests right
after each level. Before every non-explore DSpark step the gate's forecast (`drafting_estimate`) is
logged with the step's real tokens and seconds, so a level where the gate drafts and loses shows
which part of the forecast was off. Usage:
python docs/results/session15/gate_levels.py [LEVELS] [ROUNDS]   (alone; default 1,2,4,8 and 2)"""

import json
import statistics
import sys
import time

from draftsmith.api import load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine import batch_cost
from draftsmith.engine.batch_decode import BatchDecoder
from draftsmith.serving.loadtest import load_prompts

levels = [int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1,2,4,8").split(",")]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
target = load_target(dtype="float32")  # the CPU default until session 18
cost = batch_cost.cached(target.runner)
drafters = {"plain": build_drafter("plain", target), "dspark": build_drafter("dspark", target)}
decoders = {
    "plain": BatchDecoder(target.runner, 32, 640, "fixed", cost),
    "dspark": BatchDecoder(target.runner, 32, 640, "confidence", cost),
}
pool = [target.encode(p, chat=c) for p, c in load_prompts("mtbench,humaneval,gsm,alpaca", 64)]
stop = target.stop_rule(64, ())


def level(method: str, users: int, offset: int) -> tuple[float, list[dict]]:
    dec, queue, rows, made = (
        decoders[method],
        [pool[(offset + i) % len(pool)] for i in range(2 * users)],
        [],
        0,
    )
    t_start = time.perf_counter()
    while queue or dec.running:
        while queue and len(dec.running) < users:
            dec.add(list(queue.pop(0)), drafters[method].fork(), stop)
        runs = list(dec.running.values())
        explore = dec.steps + 1 >= dec._explore_at
        est = dec.drafting_estimate(runs) if method == "dspark" and not explore else None
        before, drafted = sum(len(r.progress.new) for r in runs), sum(r.stats.drafted for r in runs)
        t0 = time.perf_counter()
        for run in dec.step():
            dec.remove(run.slot)
        seconds = time.perf_counter() - t0
        tokens = sum(len(r.progress.new) for r in runs) - before
        made += tokens
        kind = (
            "explore"
            if explore
            else ("drafting" if sum(r.stats.drafted for r in runs) > drafted else "plain")
        )
        rows.append({"b": len(runs), "kind": kind, "est": est, "tokens": tokens, "seconds": seconds})
    return made / (time.perf_counter() - t_start), rows


log = []
for r in range(rounds):
    for users in levels:
        speeds = {}
        for method in ("dspark", "plain"):
            speeds[method], rows = level(method, users, 7 * r + users)
            if method == "dspark":
                full = [x for x in rows if x["b"] == users]
                summary = {}
                for kind in ("plain", "drafting", "explore"):
                    mine = [x for x in full if x["kind"] == kind]
                    if not mine:
                        continue
                    ests = [x["est"] for x in mine if x["est"]]
                    summary[kind] = {
                        "steps": len(mine),
                        "real_tok_s": sum(x["tokens"] for x in mine) / sum(x["seconds"] for x in mine),
                        "real_tokens": statistics.mean(x["tokens"] for x in mine),
                        "real_s": statistics.median(x["seconds"] for x in mine),
                        "forecast_drafting_tokens": statistics.mean(e[0] for e in ests) if ests else None,
                        "forecast_drafting_s": statistics.median(e[1] for e in ests) if ests else None,
                        "forecast_plain_s": statistics.median(e[3] for e in ests) if ests else None,
                        "forecast_depth": statistics.median(e[4] for e in ests) if ests else None,
                    }
        row = {
            "round": r,
            "users": users,
            "plain_tok_s": speeds["plain"],
            "dspark_tok_s": speeds["dspark"],
            "ratio": speeds["dspark"] / speeds["plain"],
            "dspark_steps": summary,
        }
        log.append(row)
        print(json.dumps(row, default=lambda v: round(v, 4)), flush=True)
