"""vLLM (its CPU build, in its own virtualenv) as a bench peer on the real target: it loads the target
directory draftsmith writes and our EAGLE-3 export through the launch line EXPORT.md gives, decodes
exactly what its own plain decoding does (fp32), reports accepted lengths from its own counters, and
a method it cannot run here is skipped with its reason."""

from __future__ import annotations

import pytest

from draftsmith.deploy import vllm
from draftsmith.evaluation.suites import Prompt

pytestmark = pytest.mark.skipif(not vllm.installed(), reason="vLLM's CPU build not installed (./setup.sh)")

PROMPTS = [
    Prompt("code", "c0", "Write a Python function that returns the squares of a list of numbers."),
    Prompt("chat", "h0", "Name three things that make a good cup of tea."),
]


def test_vllm_peers_decode_like_vllm_plain_and_count_acceptance(smollm, tmp_path):
    from draftsmith.evaluation.bench import run_bench

    result = run_bench(
        smollm,  # fp32: vLLM's fp32 plain and speculative decoding agree token for token
        {"code": PROMPTS[:1], "chat": PROMPTS[1:]},
        ["vllm-plain", "vllm-eagle3", "vllm-dspark"],
        repeats=1,
        max_new_tokens=48,
        progress=False,
        peer_logs=str(tmp_path / "logs"),
    )
    # DSpark runs only in vLLM's Triton model runner, which has no CPU backend: skipped, with the reason
    assert "does not support: dspark" in result.config["skipped"]["vllm-dspark"]
    by = {(s.suite, s.method): s for s in result.summaries}
    for suite in ("code", "chat"):
        plain, eagle = by[(suite, "vllm-plain")], by[(suite, "vllm-eagle3")]
        assert plain.new_tokens > 0 and eagle.identical == eagle.prompts == 1
        assert eagle.baseline == "vllm-plain" and eagle.speedup_median > 0
        # vLLM's counters: every round drafts 3 (tau per target step equals tau per drafted round)
        assert 1.0 < eagle.tau <= 4.0 and eagle.tau_drafted == pytest.approx(eagle.tau, rel=0.05)
        assert len(eagle.acceptance_by_position) == 3


def test_regenerate_against_a_real_vllm_server(smollm, tmp_path):
    """`data regenerate --engine openai` (the documented GPU path for answers) against `vllm serve`
    on loopback: the answers come back complete, and in fp32 they are the ones our engine writes."""
    import json

    import torch

    from draftsmith.evaluation.vllm_peers import VllmPeer, target_directory
    from draftsmith.training.jsonl import read_rows
    from draftsmith.training.regenerate import RegenConfig, local_engine, openai_engine, regenerate

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": p.id, "prompt": p.text}) + "\n" for p in PROMPTS))
    cfg = RegenConfig(max_new_tokens=32, temperature=0.0, top_p=1.0, top_k=0, batch=1)
    server = VllmPeer(
        "vllm-plain",
        target_directory(smollm),
        None,
        "float32",
        torch.get_num_threads(),
        tmp_path / "vllm.log",
        smollm.eos_ids,
    )
    try:
        engine = openai_engine(f"http://127.0.0.1:{server.port}/v1", "target", cfg, concurrency=2)
        stats = regenerate(prompts, tmp_path / "vllm.jsonl", engine, progress=False)
    finally:
        server.close()
    assert stats["written"] == len(PROMPTS)
    theirs = {r["id"]: r for r in read_rows(tmp_path / "vllm.jsonl")}
    regenerate(prompts, tmp_path / "ours.jsonl", local_engine(smollm, cfg), progress=False)
    ours = {r["id"]: r for r in read_rows(tmp_path / "ours.jsonl")}
    for pid, row in theirs.items():
        assert row["answer"].strip() and row["new_tokens"] > 0 and row["finish_reason"] in ("stop", "length")
        assert row["answer"] == ours[pid]["answer"], (pid, row["answer"], ours[pid]["answer"])


def test_vllms_steps_and_drafting_are_timed_inside_vllm(smollm, tmp_path):
    """`plan --measure --engine vllm`'s profile: vLLM in-process, its engine steps timed by the tokens
    they verify and its drafting timed apart; n-gram drafting on the repeating prompt fills its rounds."""
    from draftsmith.evaluation.vllm_peers import target_directory
    from draftsmith.planning import vllm as plan_vllm

    runs = plan_vllm.curve_runs(smollm.tokenizer, drafts=(2,), tokens=32)
    found = plan_vllm.profile(target_directory(smollm), "float32", runs, 2, tmp_path / "profile.log")
    assert set(found) == {"plain", "ngram-2"}
    assert {n for n, _, _ in found["plain"]["steps"]} == {1}  # plain decoding: one token a step
    assert all(d == 0.0 for _, _, d in found["plain"]["steps"])
    filled = [s for n, s, d in found["ngram-2"]["steps"] if n == 3]
    assert len(filled) >= len(found["ngram-2"]["steps"]) // 2  # most rounds verify 1 + 2 tokens
    curve = plan_vllm.curve_from(found, "test")
    assert curve.tokens == (1, 3) and all(0 < s < 1 for s in curve.seconds)
    assert found["plain"]["prefill_steps"][0][0] == len(smollm.tokenizer.encode(plan_vllm.REPEAT_PROMPT))


def test_a_distilled_drafter_runs_as_vllms_draft_model(smollm, tmp_path):
    """`vllm-draft-model`: a distilled drafter from `draftsmith build`, exported as a plain HF
    directory, runs as vLLM's draft_model and writes exactly vLLM's plain output (fp32)."""
    import json

    from draftsmith.cli import main
    from draftsmith.evaluation.bench import run_bench

    texts = [p.text for p in PROMPTS] + [
        f"Name {n} things that are {c}." for n in (2, 3, 4) for c in "red blue".split()
    ]
    texts += ["What is 3 plus 4?", "Say hello in French.", "List two fruits.", "Why do birds sing?"] * 2
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": t}) + "\n" for i, t in enumerate(texts)))
    args = [
        "build",
        "--method",
        "distilled",
        "--steps",
        "3",
        "--prompts",
        str(prompts),
        "--out",
        str(tmp_path / "b"),
    ]
    assert (
        main(
            [*args, "--top-up", "0", "--max-new-tokens", "16", "--bench-prompts", "2", "--bench-tokens", "8"]
        )
        == 0
    )
    result = run_bench(
        smollm,
        {"code": PROMPTS[:1]},
        ["vllm-plain", "vllm-draft-model"],
        repeats=1,
        max_new_tokens=24,
        progress=False,
        peer_logs=str(tmp_path / "logs"),
        drafter_options={"drafter": {"distilled": str(tmp_path / "b" / "drafter")}},
    )
    by = {(s.suite, s.method): s for s in result.summaries}
    peer = by[("code", "vllm-draft-model")]
    assert peer.identical == peer.prompts == 1 and peer.baseline == "vllm-plain" and peer.tau >= 1.0
