"""What a drafter proposes first, in our engine, in llama.cpp and in vLLM: the same exported weights
must draft the same tokens everywhere.

Accepted length compares engines only for a trained drafter; proposals compare any drafter, even one
with random weights. Each engine gets the same prompt tokens, the target picks the first answer token
greedily from the prompt pass, and the drafter's first block (drafted from prompt + that token) is
read back: from our engine's drafter directly, from llama-server's debug log (it lists the draft
candidates), and from vLLM's proposer, wrapped in its own process (deploy/vllm_first_drafts.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from draftsmith.errors import DraftsmithError
from draftsmith.evaluation.servers import free_port, wait_healthy

LLAMACPP_DRAFT = re.compile(r"seq_id +0, draft candidate +0, pos +(\d+): +(\d+)")


@dataclass
class FirstDrafts:
    """One prompt's first answer token and the block drafted after it (our engine adds each drafted
    token's probability, to tell a near-tie from a real difference)."""

    token: int
    drafts: list[int]
    probs: list[float] = field(default_factory=list)


def block_drafts(directory: str | Path) -> int:
    """How many tokens a DFlash/DSpark drafts in the block it was trained with (3 for EAGLE-3, which
    drafts one token a pass). vLLM and llama.cpp feed the drafter one slot per requested draft; with
    fewer, the block's slots see a shorter block than in training and draft otherwise than ours, which
    always computes the whole block."""
    from draftsmith.export.common import read_config

    config = read_config(Path(directory)) or {}
    if "block_size" not in config:
        return 3
    return int(config["block_size"]) - (0 if config.get("sample_from_anchor") else 1)


def ours(target, method: str, ids: list[int], k: int = 3, options=None) -> FirstDrafts:
    """Our drafter's block once the first answer token is known. Other engines sample that token from
    the prompt pass and draft from there; ours drafts from the prompt's last token, so its first block
    is drafted and then withdrawn (no draft verified), and the second is the one compared. (DFlash and
    DSpark keep every drafted token with options `length_rule="history"`, as other engines do.)"""
    from draftsmith.drafters.registry import METHODS
    from draftsmith.engine.decode import speculative_generate
    from draftsmith.engine.drafter import Draft

    rounds: dict[int, tuple[list[int], list[float]]] = {}

    class Recording(METHODS[method]):
        def propose(self, tokens, k, params, generator):
            d = super().propose(tokens, k, params, generator)
            if len(tokens) == len(ids):  # the prompt pass picks the first token alone
                return Draft(d.tokens[:0], None if d.probs is None else d.probs[:0])
            rounds.setdefault(len(tokens), (d.tokens.tolist(), list(getattr(self, "token_probs", []))))
            return d

    drafter = Recording.build(target, options)
    out = speculative_generate(target.runner, drafter, ids, target.stop_rule(2 * k + 2), k=k, adaptive=False)
    if len(ids) + 1 not in rounds:
        raise DraftsmithError(f"the target stopped before drafting began (prompt of {len(ids)} tokens)")
    tokens, probs = rounds[len(ids) + 1]
    return FirstDrafts(int(out.tokens[0]), tokens, probs)


def in_llamacpp(
    target_gguf: Path,
    drafter_gguf: Path,
    method: str,
    prompts: list[list[int]],
    log: Path,
    drafter_dir: Path | None = None,
    k: int = 3,
    threads: int = 2,
) -> list[FirstDrafts]:
    """Each prompt's first drafted block in llama-server, every draft kept (`--spec-draft-p-min 0`)."""
    from draftsmith.deploy import llamacpp
    from draftsmith.export.gguf import spec_type

    port = free_port()
    cmd = [str(llamacpp.binary("llama-server")), "-m", str(target_gguf), "-md", str(drafter_gguf)]
    cmd += ["--spec-type", spec_type(method, drafter_dir), "--spec-draft-n-max", str(k)]
    cmd += ["--spec-draft-p-min", "0", "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["-t", str(threads), "-np", "1", "-c", "2048", "-lv", "5"]
    proc = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        if wait_healthy(proc, port, 120.0) != "ready":
            raise DraftsmithError(f"llama-server did not start (log: {log})")
        out = []
        for ids in prompts:
            start = len(log.read_text(errors="replace"))
            body = {"prompt": ids, "n_predict": k + 2, "temperature": 0, "top_k": 1, "cache_prompt": False}
            body["return_tokens"] = True
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode()
            )
            reply = json.loads(urllib.request.urlopen(req, timeout=120).read())
            found = [
                (int(p), int(t)) for p, t in LLAMACPP_DRAFT.findall(log.read_text(errors="replace")[start:])
            ]
            block: list[int] = []
            for pos, tok in found:  # the first round: positions 0, 1, ... in order
                if pos != len(block):
                    break
                block.append(tok)
            out.append(FirstDrafts(int(reply["tokens"][0]), block))
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def in_vllm(
    model: str,
    speculative_config: dict,
    prompts: list[list[int]],
    log: Path,
    dtype: str = "float32",
    threads: int = 2,
    timeout: float = 600.0,
) -> list[FirstDrafts]:
    """Each prompt's first drafted block in vLLM (its CPU build, in its own virtualenv and process)."""
    from draftsmith.deploy import vllm

    python = vllm.require()
    script = Path(__file__).resolve().parents[1] / "deploy" / "vllm_first_drafts.py"
    request = {"model": model, "speculative_config": speculative_config, "dtype": dtype, "prompts": prompts}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(request, f)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "VLLM_CPU_KVCACHE_SPACE": "1"}
    env.pop("PYTHONPATH", None)
    try:  # -P: the script's folder (which holds our deploy/vllm.py) must not shadow the vllm package
        run = subprocess.run(
            [str(python), "-P", str(script), f.name], capture_output=True, text=True, env=env, timeout=timeout
        )
    finally:
        os.unlink(f.name)
    log.write_text(run.stdout + run.stderr)
    line = [x for x in run.stdout.splitlines() if x.startswith("FIRST_DRAFTS ")]
    if run.returncode != 0 or not line:
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise DraftsmithError(f"vLLM's first drafts failed: {tail[0][:300]} (log: {log})")
    found = json.loads(line[-1].removeprefix("FIRST_DRAFTS "))["first_drafts"]
    return [FirstDrafts(int(x["token"]), [int(t) for t in x["drafts"]]) for x in found]
