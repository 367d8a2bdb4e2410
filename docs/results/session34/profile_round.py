"""Where a DSpark round's time goes (cProfile over 3 gsm + 3 humaneval bench prompts, 128 tokens, fp32).

Usage: python docs/results/session34/profile_round.py [METHOD]   (alone on the machine)
"""

import cProfile
import pstats
import sys
import time

import torch

from draftsmith.api import generate, load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.evaluation.suites import load_gsm, load_humaneval

torch.set_num_threads(2)
target = load_target(dtype="float32", fixed_rows=0)
drafter = build_drafter(sys.argv[1] if len(sys.argv) > 1 else "dspark", target)
prompts = load_gsm(3) + load_humaneval(3)
generate(target, prompts[0].text, drafter, max_new_tokens=32, chat=prompts[0].chat)  # warm-up
prof = cProfile.Profile()
t0 = time.perf_counter()
tokens = rounds = 0
draft_s = 0.0
for p in prompts:
    prof.enable()
    out = generate(target, p.text, drafter, max_new_tokens=128, chat=p.chat)
    prof.disable()
    tokens, rounds, draft_s = tokens + len(out.tokens), rounds + out.stats.rounds, draft_s + out.stats.draft_s
elapsed = time.perf_counter() - t0
print(f"{tokens} tokens, {rounds} rounds, {elapsed:.1f} s, drafting {1000 * draft_s / rounds:.2f} ms a round")
pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
