"""One process of the OpenMP wait-policy / huge-page probe: plain and the shipped DSpark on 3 humaneval
+ 3 gsm prompts, 128 tokens, after a warm-up; prints tok/s, drafting and verification ms a round. Run it
alternately with and without OMP_WAIT_POLICY=ACTIVE (omp_probe.sh) or THP_MEM_ALLOC_ENABLE=1
(thp_probe.sh: torch's CPU allocator then puts large tensors, the weights, in 2 MB pages).
Usage: python docs/results/session42/omp_probe.py
"""

import os

from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.evaluation.suites import load_suite
from draftsmith.models.target import Target

target = Target.load(None)
prompts = [target.encode(p.text, chat=p.chat) for s in ("humaneval", "gsm") for p in load_suite(s, 3)]
drafters = {m: build_drafter(m, target) for m in ("plain", "dspark")}
for d in drafters.values():
    speculative_generate(target.runner, d, prompts[0], target.stop_rule(32))
policy = os.environ.get("OMP_WAIT_POLICY", "default")
if "THP_MEM_ALLOC_ENABLE" in os.environ:
    policy = f"thp={os.environ['THP_MEM_ALLOC_ENABLE']}"
for name, d in drafters.items():
    secs = toks = rounds = draft = verify = 0.0
    for ids in prompts:
        s = speculative_generate(target.runner, d, ids, target.stop_rule(128)).stats
        secs, toks, rounds = secs + s.total_s, toks + s.new_tokens, rounds + s.rounds
        draft, verify = draft + s.draft_s, verify + s.verify_s
    print(
        f"{policy:8s} {name:6s}: {toks / secs:.1f} tok/s, drafting {1000 * draft / rounds:.2f} ms a round, "
        f"verification {1000 * verify / rounds:.2f} ms"
    )
