"""One drafter, three engines: the whole path (prompts -> the target's answers -> cache -> a few training
steps -> exports, as `draftsmith build` runs it) on a Qwen3 target and on the default Llama target, then
each exported drafter's first drafts in llama.cpp (GGUF) and in vLLM (speculators) against ours.

The Qwen3 target is transformers' Qwen3ForCausalLM with random weights (SmolLM2's tokenizer saved
beside it); the Llama target is the default SmolLM2-135M as the standard HF directory draftsmith
writes. A few training steps make acceptance meaningless, so proposals are compared: in fp32
everywhere, every drafted token must be the same (on the Llama target the drafters start from the
shipped ones, so their proposals are those of trained drafters). DFlash/DSpark draft their whole trained block
(vLLM and llama.cpp feed one slot per requested draft, and a shorter block drafts otherwise). vLLM runs
no DSpark on CPUs (its V2 runner needs Triton), so DSpark is compared in llama.cpp only.
"""

from __future__ import annotations

import json

import pytest
import torch

from draftsmith.deploy import llamacpp, vllm

pytestmark = pytest.mark.slow
METHODS = ("dflash", "dspark", "eagle3")
PROMPTS = [
    "Write a Python function that adds two numbers.",
    "Name three colours.",
    "What is 12 times 7?",
    "Why is the sky blue?",
]
TRAIN = [
    "Sort these words: pear, apple, fig.", "Count the letters in 'banana'.", "Give a synonym for happy.",
    "Translate 'cat' to French.", "List two prime numbers.", "Write a haiku about snow.",
    "What is the capital of Peru?", "Reverse the string 'abc'.", "Why is the sea salty?",
    "Write a SQL query that counts rows.", "Name a fruit that is yellow.", "What is 2 to the power 10?",
    "Describe a cat in five words.", "Give an example of a verb.",
]  # fmt: skip


def random_qwen3(out, tokenizer) -> str:
    """A small Qwen3 with random weights (wide enough an init that its greedy answers vary)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    cfg = AutoConfig.for_model(
        "qwen3", vocab_size=len(tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=8,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096,
        tie_word_embeddings=True, initializer_range=0.1, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def built(request, tmp_path_factory):
    """(target, {method: build directory}) after `draftsmith build` of each method: from scratch on
    the Qwen3 target, from the shipped drafters on the Llama one (the build's default)."""
    from draftsmith.api import load_target
    from draftsmith.cli import main
    from draftsmith.models.loading import hf_directory

    root = tmp_path_factory.mktemp(request.param)
    if request.param == "qwen3":
        source = random_qwen3(root / "target", load_target(None).tokenizer)
    else:
        source = hf_directory(None)  # the default target as the HF directory vLLM loads
    prompts = root / "prompts.jsonl"
    rows = [{"id": f"p{i}", "prompt": p} for i, p in enumerate(PROMPTS + TRAIN)]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    builds = {}
    for method in METHODS:
        out = root / method
        args = ["build", "--target", source, "--method", method, "--prompts", str(prompts), "--out", str(out)]
        args += ["--steps", "3", "--top-up", "0", "--max-new-tokens", "24"]
        args += ["--bench-prompts", "2", "--bench-tokens", "8"]
        assert main(args) == 0
        builds[method] = out
    return load_target(source, dtype="float32"), builds


def ours_and_ids(target, method, drafter):
    """The prompts' tokens, the drafts a block, and our first drafts (as the exports draft: no
    draftsmith-only inputs, the draft vocabulary the export carries)."""
    from draftsmith.drafters.registry import METHODS as REGISTRY
    from draftsmith.evaluation import first_drafts
    from draftsmith.evaluation.llamacpp_peers import engine_variant

    ids = [target.encode(p) for p in PROMPTS]
    k = first_drafts.block_drafts(drafter)
    lookup, cut = engine_variant(method, drafter)
    # every token of the block (not cut by the drafter's own probabilities), as the engines are asked
    same = {"lookup": lookup, "draft_vocab": cut or 0, "length_rule": "history"} if method != "eagle3" else {}
    options = REGISTRY[method].options(drafter=str(drafter), **same)
    with torch.no_grad():
        return ids, k, [first_drafts.ours(target, method, x, k, options=options) for x in ids]


def test_the_build_writes_every_engines_export(built):
    _, builds = built
    for out in builds.values():
        exports = json.loads((out / "build.json").read_text())["stages"]["export"]["result"]
        assert set(exports) == {"llamacpp", "vllm", "sglang"}, exports
        assert not [e for e in exports.values() if "failed" in e], exports
    report = (builds["dflash"] / "report.md").read_text()
    assert "--speculative-config" in report and "--spec-type draft-dflash" in report


@pytest.mark.skipif(not llamacpp.installed(), reason="llama.cpp not built (./setup.sh)")
def test_llama_cpp_drafts_what_our_engine_drafts(built, tmp_path):
    from draftsmith.evaluation import first_drafts
    from draftsmith.evaluation.llamacpp_peers import engine_variant
    from draftsmith.export.gguf import write_target
    from draftsmith.export.methods import export_directory

    target, builds = built
    target_file = write_target(target, tmp_path, "f32")  # fp32 weights, as ours
    for method, out in builds.items():
        drafter = out / "drafter"
        ids, k, ours = ours_and_ids(target, method, drafter)
        lookup, cut = engine_variant(method, drafter)
        gguf, _ = export_directory(
            drafter, "gguf", tmp_path / method, target, None, "f32", lookup=lookup, draft_vocab=cut
        )
        theirs = first_drafts.in_llamacpp(
            target_file, gguf, method, ids, tmp_path / f"{method}.log", drafter, k
        )
        assert [(t.token, t.drafts) for t in theirs] == [(o.token, o.drafts) for o in ours], method
        assert all(len(o.drafts) == k for o in ours) and len({d for o in ours for d in o.drafts}) > 1


@pytest.mark.skipif(not vllm.installed(), reason="vLLM's CPU build not installed (./setup.sh)")
@pytest.mark.parametrize("method", ["dflash", "eagle3"])
def test_vllm_drafts_what_our_engine_drafts(built, tmp_path, method):
    """vLLM loads the target directory and the build's own speculators export (its launch line)."""
    from draftsmith.evaluation import first_drafts
    from draftsmith.models.loading import hf_directory

    target, builds = built
    drafter = builds[method] / "drafter"
    ids, k, ours = ours_and_ids(target, method, drafter)
    spec = {"method": method, "model": str(builds[method] / "export" / "vllm-speculators")}
    spec["num_speculative_tokens"] = k
    theirs = first_drafts.in_vllm(hf_directory(target.source), spec, ids, tmp_path / "vllm.log")
    assert [(t.token, t.drafts) for t in theirs] == [(o.token, o.drafts) for o in ours]
