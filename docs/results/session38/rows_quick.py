"""Quick probe, 4 / 5 / 6 fixed rows: plain and the shipped DSpark on 3 humaneval + 3 gsm prompts,
128 tokens, each shape twice in turn (one process, so the same warm target). It pointed at 5 rows;
the interleaved benches in bench-fr4/ and bench-fr5/ are what decided (no).

Usage: python docs/results/session38/rows_quick.py
"""

import torch

from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.evaluation.suites import load_gsm, load_humaneval
from draftsmith.models.target import Target

torch.set_num_threads(2)
target = Target.load()
prompts = load_humaneval(3) + load_gsm(3)
drafters = {"plain": build_drafter("plain", target), "dspark": build_drafter("dspark", target)}
for rep in range(2):
    for rows in (4, 5, 6):
        target.set_fixed_rows(rows)
        for name, drafter in drafters.items():
            seconds = tokens = verify = rounds = 0.0
            for p in prompts:
                ids = target.encode(p.text, p.chat)
                s = speculative_generate(target.runner, drafter, ids, target.stop_rule(128)).stats
                seconds, tokens = seconds + s.total_s, tokens + s.new_tokens
                verify, rounds = verify + s.verify_s, rounds + s.rounds
            print(
                f"repeat {rep} rows {rows} {name}: {tokens / seconds:.1f} tok/s, "
                f"verify {1000 * verify / rounds:.2f} ms a round, tau {tokens / rounds:.2f}",
                flush=True,
            )
