"""The planner against published measurements (docs/PLANNING.md): at least 15 held-out cases, at least
80% within 25% and none off by more than 2x; the fit cases reproduce the constants in
planning.backends; `plan --published` prints the table."""

from __future__ import annotations

import argparse
import json

import pytest

from draftsmith.planning import backends, published
from draftsmith.planning.command import add_arguments, run


@pytest.fixture(scope="module")
def results():
    return published.evaluate()


def test_the_done_when_bounds(results):
    s = published.summary(results)
    assert s["held_out"] >= 15
    assert s["share_within"] >= published.NEEDED, published.markdown(results)
    assert s["beyond_2x"] == [] and s["passes"]


def test_the_table_covers_what_it_must(results):
    held = [r.case for r in results if r.counted]
    kinds = {c.kind for c in held}
    assert {"decode", "speedup", "concurrency", "offload"} <= kinds
    decode = [c for c in held if c.kind == "decode"]
    assert any(c.gpu in ("3090", "5090", "4090") for c in decode)  # consumer GPUs
    assert any(c.gpu in ("h100-sxm", "a100-40g") for c in decode)  # data-centre GPUs
    assert any(c.gpu is None for c in decode)  # CPUs
    assert {c.method for c in held if c.method} >= {"eagle3", "dflash"}
    assert len({c.key.rsplit("-b", 1)[0] for c in held if c.kind == "concurrency"}) >= 1


def test_every_case_has_a_source_and_fit_cases_are_marked(results):
    for c in published.CASES:
        assert c.source and c.published > 0 and c.kind in ("decode", "speedup", "concurrency", "offload")
        assert (
            c.tau is not None or c.tau_from is not None or c.fit or c.kind not in ("speedup", "concurrency")
        )
    fits = published.summary(results)["fit_cases"]
    assert set(fits) == {c.key for c in published.CASES if c.fit}
    for r in results:
        if r.case.fit:
            assert r.ratio == pytest.approx(1.0, abs=0.005)  # a fit case reproduces its own number


def test_the_constants_are_what_the_fit_cases_give():
    got = published.fit()
    assert got["llamacpp-gpu efficiency"] == pytest.approx(backends.LLAMACPP_CUDA_EFFICIENCY, abs=0.002)
    assert got["llamacpp-gpu expert efficiency"] == pytest.approx(
        backends.LLAMACPP_EXPERT_EFFICIENCY, abs=0.002
    )
    assert got["llamacpp-apple efficiency"] == pytest.approx(backends.LLAMACPP_METAL_EFFICIENCY, abs=0.002)
    assert got["vllm efficiency"] == pytest.approx(backends.VLLM_EFFICIENCY, abs=0.002)
    assert got["sglang efficiency"] == pytest.approx(backends.SGLANG_EFFICIENCY, abs=0.002)
    assert got["serving compute efficiency"] == pytest.approx(backends.SERVING_COMPUTE_EFFICIENCY, abs=0.01)
    assert got["vllm round overhead"] == pytest.approx(backends.VLLM_ROUND_S, abs=2e-5)
    assert got["vllm draft pass floor"] == pytest.approx(backends.VLLM_PASS_FLOOR_S, abs=2e-5)


def test_single_stream_speedups_from_a_given_tau(results):
    """`plan --tau X --draft-len K`: published batch-1 speedups at their accepted length and draft
    length, slowdowns included, at least 80% within 25% and none off by 2x."""
    held = [r for r in results if r.counted and r.case.kind == "speedup"]
    assert len(held) >= 10 and any(r.case.published < 1 for r in held)
    assert sum(r.within for r in held) / len(held) >= published.NEEDED
    assert all(1 / published.NEVER <= r.ratio <= published.NEVER for r in held)


def test_backend_spreads_cover_the_published_cases(results):
    for r in results:
        e = published.implied_efficiency(r)
        if e is None:
            continue
        lo, hi = published._steps(r.case).backend.spread
        assert lo - 0.01 <= e <= hi + 0.01, (r.case.key, e, lo, hi)


def test_predictions_come_from_the_model_not_the_case():
    """Moving a held-out case's published number moves its ratio, not its prediction."""
    case = published.BY_KEY["h100-llama31-8b-vllm"]
    moved = published.Case(**{**case.__dict__, "published": case.published * 2})
    assert published.predict(moved) == pytest.approx(published.predict(case))


def test_plan_published_command(capsys):
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert run(p.parse_args(["--published"])) == 0
    out = capsys.readouterr().out
    assert "| case | kind | published | predicted | ratio | within 25% | source |" in out
    assert "Held out:" in out and "fit (" in out
    assert run(p.parse_args(["--published", "--json"])) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["passes"] and len(data["cases"]) == len(published.CASES)


def test_docs_show_the_current_table(results):
    """docs/PLANNING.md carries `plan --published`'s table as it stands (rerun it after changing a case)."""
    from pathlib import Path

    doc = (Path(__file__).parents[1] / "docs/PLANNING.md").read_text()
    assert published.markdown(results) in doc
