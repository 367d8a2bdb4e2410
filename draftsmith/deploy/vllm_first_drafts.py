"""Each prompt's first drafted block inside vLLM: run by vLLM's own python (not draftsmith's), as
`python vllm_first_drafts.py REQUEST.json`; prints JSON.

vLLM does not report what its drafter proposed, only how much was accepted. To compare proposals
(the only fair check for a drafter with random weights) the engine runs in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0) and its proposer's `propose` is wrapped to record what it returns.
The first call after a prompt's prefill drafts from the prompt plus the first token the target
picked; that block and that token come back per prompt.

REQUEST.json: {"model": T, "speculative_config": {...}, "dtype": "float32", "prompts": [[ids], ...]}
Prints: {"first_drafts": [{"token": t, "drafts": [d1, d2, ...]}, ...]}
"""

from __future__ import annotations

import json
import os
import sys


def main(path: str) -> None:
    request = json.loads(open(path).read())
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine core in this process: the wrap applies
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    calls: list[list[int]] = []
    propose = SpecDecodeBaseProposer.propose

    def recording(self, *args, **kwargs):
        out = propose(self, *args, **kwargs)
        calls.append(out.reshape(-1).tolist())
        return out

    SpecDecodeBaseProposer.propose = recording
    llm = LLM(
        model=request["model"],
        dtype=request.get("dtype", "float32"),
        speculative_config=request["speculative_config"],
        max_model_len=1024,
        max_num_seqs=1,
        enable_prefix_caching=False,
        enforce_eager=True,
    )
    greedy = SamplingParams(temperature=0.0, max_tokens=2)
    found = []
    for ids in request["prompts"]:
        calls.clear()
        out = llm.generate([TokensPrompt(prompt_token_ids=ids)], greedy, use_tqdm=False)[0]
        if not calls:
            raise SystemExit(f"vLLM's proposer was never called for prompt {ids[:8]}...")
        found.append({"token": out.outputs[0].token_ids[0], "drafts": calls[0]})
    print("FIRST_DRAFTS " + json.dumps({"first_drafts": found}), flush=True)


if __name__ == "__main__":  # vLLM spawns helpers that re-import the main module
    main(sys.argv[1])
