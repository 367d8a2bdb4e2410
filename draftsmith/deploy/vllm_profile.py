"""Time vLLM's engine steps and its drafting, inside vLLM: run by vLLM's own python (not draftsmith's),
as `python -P vllm_profile.py REQUEST.json`; prints JSON.

vLLM's server reports tokens and acceptance but not what a round costs. Here the engine runs in this
process (VLLM_ENABLE_V1_MULTIPROCESSING=0) and three of its functions are wrapped: the scheduler's
`schedule` (how many tokens the step runs: 1 + the drafts it verifies), the engine core's `step`
(schedule, forward, sampling, drafting, bookkeeping: a round) and the model runner's
`propose_draft_token_ids` (drafting alone: n-gram lookup, or the EAGLE-3 / DFlash drafter's passes).

One engine a process: vLLM cannot build a second one where a first was (draftsmith runs this script
once a run). REQUEST.json: {"model": T, "dtype": "float32", "runs": [{"name": N,
"speculative_config": {...} or null, "prompts": [[ids], ...], "max_tokens": M}, ...]}
Prints: {"runs": {N: {"steps": [[tokens, step_s, draft_s], ...], "prefill_steps": [...]}}}
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time


def main(path: str) -> None:
    request = json.loads(open(path).read())
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process: wraps apply
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams
    from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
    from vllm.inputs import TokensPrompt
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    state = {"tokens": 0, "draft_s": 0.0, "steps": []}
    schedule, step, propose = Scheduler.schedule, EngineCore.step, GPUModelRunner.propose_draft_token_ids

    def timed_schedule(self, *a, **kw):
        out = schedule(self, *a, **kw)
        state["tokens"] = int(out.total_num_scheduled_tokens)
        return out

    def timed_propose(self, *a, **kw):
        t0 = time.perf_counter()
        out = propose(self, *a, **kw)
        state["draft_s"] += time.perf_counter() - t0
        return out

    def timed_step(self, *a, **kw):
        state["tokens"], state["draft_s"] = 0, 0.0
        t0 = time.perf_counter()
        out = step(self, *a, **kw)
        if state["tokens"]:
            state["steps"].append([state["tokens"], time.perf_counter() - t0, state["draft_s"]])
        return out

    Scheduler.schedule, EngineCore.step = timed_schedule, timed_step
    GPUModelRunner.propose_draft_token_ids = timed_propose
    result = {}
    for run in request["runs"]:
        llm = LLM(
            model=request["model"],
            dtype=request.get("dtype", "float32"),
            speculative_config=run.get("speculative_config"),
            max_model_len=2048,
            max_num_seqs=1,
            enable_prefix_caching=False,
        )
        greedy = SamplingParams(temperature=0.0, max_tokens=int(run["max_tokens"]), ignore_eos=True)
        prompts = [TokensPrompt(prompt_token_ids=ids) for ids in run["prompts"]]
        llm.generate(prompts[:1], greedy, use_tqdm=False)  # warm up outside the timings
        decode, prefill = [], []
        for p in prompts:
            state["steps"] = []
            llm.generate([p], greedy, use_tqdm=False)
            prefill += state["steps"][:1]  # the prompt's pass (one chunk: prompts are short)
            decode += state["steps"][1:]
        result[run["name"]] = {"steps": decode, "prefill_steps": prefill}
        del llm
        gc.collect()
        cleanup_dist_env_and_memory()
    print("VLLM_PROFILE " + json.dumps({"runs": result}), flush=True)


if __name__ == "__main__":  # vLLM spawns helpers that re-import the main module
    main(sys.argv[1])
