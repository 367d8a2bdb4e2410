"""What a drafter proposes first, in our engine, in llama.cpp and in vLLM: the same exported weights
must draft the same tokens everywhere.

Accepted length compares engines only for a trained drafter; proposals compare any drafter, even one
with random weights. Each engine gets the same prompt tokens, the target picks the first answer token
greedily from the prompt pass, and the drafter's first block (drafted from prompt + that token) is
read back: from our engine's drafter directly, from llama-server's debug log (it lists the draft
candidates), and from vLLM's proposer, wrapped in its own process (deploy/vllm_first_drafts.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from draftsmith.errors import DraftsmithError

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
    from draftsmith.evaluation.llamacpp_peers import LlamaServerPeer, completion
    from draftsmith.export.gguf import spec_type

    args = ["-md", str(drafter_gguf), "--spec-type", spec_type(method, drafter_dir)]
    args += ["--spec-draft-n-max", str(k), "--spec-draft-p-min", "0", "-lv", "5"]  # 5: drafts logged
    server = LlamaServerPeer("first-drafts", args, Path(target_gguf), threads, log, frozenset())
    try:
        out = []
        for ids in prompts:
            start = len(log.read_text(errors="replace"))
            reply = completion(server.port, ids, k + 2)
            text = log.read_text(errors="replace")[start:]
            found = [(int(p), int(t)) for p, t in LLAMACPP_DRAFT.findall(text)]
            block: list[int] = []
            for pos, tok in found:  # the first round: positions 0, 1, ... in order
                if pos != len(block):
                    break
                block.append(tok)
            out.append(FirstDrafts(int(reply["tokens"][0]), block))
        return out
    finally:
        server.close()


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

    request = {"model": model, "speculative_config": speculative_config, "dtype": dtype, "prompts": prompts}
    found = vllm.run_script("vllm_first_drafts.py", request, threads, log, "FIRST_DRAFTS", timeout)[
        "first_drafts"
    ]
    return [FirstDrafts(int(x["token"]), [int(t) for t in x["drafts"]]) for x in found]
