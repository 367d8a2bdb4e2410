"""One n-token step of the default target in each weight layout, interleaved, median of 60 (context
200): checks the calibrated plan (`row_major`) against a direct measurement.
Usage: python docs/results/session13/step_layout.py"""

import statistics
import time

import torch

from draftsmith.api import load_target

target = load_target(dtype="float32")  # the CPU default until session 18
r = target.runner
saved = dict(r.plan)
with torch.inference_mode():
    r.reset(400)
    r.forward(torch.zeros(200, dtype=torch.long), n_logits=0)
    for n in (1, 2, 3, 4, 8):
        times = {False: [], True: []}
        for _ in range(60):
            for row_major in (False, True):
                r.plan = {n: (n, row_major)}
                t0 = time.perf_counter()
                r.forward(torch.zeros(n, dtype=torch.long), n_logits=n)
                times[row_major].append(time.perf_counter() - t0)
                r.rollback(200)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        print(f"{n}-token step: [in,out] {med[False]:.2f} ms, [out,in] {med[True]:.2f} ms; plan {saved[n]}")
