"""Continuous batching: exact greedy outputs, slot refills, EOS, and the batched regenerate path."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import IdTokenizer, tiny_model, tiny_target

from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.batch_sampler import BatchSampler
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.sampling import SamplingParams
from draftsmith.errors import DraftsmithError
from draftsmith.models.target import Target
from draftsmith.training.jsonl import read_rows
from draftsmith.training.regenerate import RegenConfig, local_engine, regenerate


def prompts(n: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randint(3, 90, (int(torch.randint(1, 12, (1,), generator=g)),), generator=g).tolist()
        for _ in range(n)
    ]


@pytest.mark.parametrize("slots", [1, 3, 8])
def test_greedy_batches_equal_one_sequence_at_a_time(slots):
    target = tiny_target()
    eos = frozenset({2, 7, 11})  # several stop ids so some sequences end early and their slot is refilled
    ps = prompts(10)
    sampler = BatchSampler(target.runner, slots, capacity=64)
    got = {d.index: (d.tokens, d.finish_reason) for d in sampler.generate(ps, 20, SamplingParams(), eos)}
    assert sorted(got) == list(range(10))
    for i, p in enumerate(ps):
        ref = speculative_generate(target.runner, PlainDrafter(), p, StopRule(20, eos), SamplingParams())
        assert got[i] == (ref.tokens, ref.finish_reason)
    assert {r for _, r in got.values()} == {"eos", "length"}  # both endings were exercised


def test_prompt_beyond_capacity_is_refused():
    sampler = BatchSampler(tiny_target().runner, 2, capacity=16)
    with pytest.raises(ValueError, match="exceed capacity"):
        list(sampler.generate([[3] * 10], 8, SamplingParams(), frozenset()))


def test_non_lean_runner_is_refused():
    target = Target(tiny_model("gemma3_text", layers=2), IdTokenizer())
    with pytest.raises(TypeError):
        BatchSampler(target.runner, 2, 16)


def write_prompts(path, rows):
    path.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "prompt": " ".join(f"t{t}" for t in p)}) + "\n"
            for i, p in enumerate(rows)
        )
    )


@pytest.mark.parametrize("arch", ["llama", "gemma3_text"])  # continuous batching, and the HF fallback
def test_batched_regeneration_writes_every_prompt_once(tmp_path, arch):
    target = Target(tiny_model(arch, layers=2), IdTokenizer())
    write_prompts(tmp_path / "p.jsonl", prompts(7))
    out = tmp_path / "a.jsonl"
    cfg = RegenConfig(max_new_tokens=6, batch=3, max_prompt_tokens=9)
    stats = regenerate(tmp_path / "p.jsonl", out, local_engine(target, cfg), progress=False)
    rows = list(read_rows(out))
    kept = sum(len(p) <= 9 for p in prompts(7))
    assert len(rows) == kept == len({r["id"] for r in rows}) and stats["new_tokens"] == sum(
        r["new_tokens"] for r in rows
    )
    assert all(1 <= r["new_tokens"] <= 6 and r["finish_reason"] in ("eos", "length") for r in rows)


@pytest.mark.parametrize("bad", [dict(batch=0), dict(max_new_tokens=0), dict(max_prompt_tokens=0)])
def test_bad_regeneration_settings_are_refused(bad):
    with pytest.raises(DraftsmithError):
        RegenConfig(**bad)
