"""Mixed exact step shapes (`LeanLlamaRunner.set_mixed_rows`): each step size runs as its own
calibrated shape where the probe finds every shape's rows bitwise alike, and nowhere else."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import VOCAB, tiny_model
from test_engine import perturbed_copy, prompt

from draftsmith.drafters.draft_model import DraftModelDrafter
from draftsmith.drafters.ngram import NgramDrafter
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.lean_llama import LeanLlamaRunner
from draftsmith.errors import DraftsmithError

TABLE = {n: 1.0 + 0.05 * n for n in range(1, 17)}


def bf16_runner() -> LeanLlamaRunner:
    runner = LeanLlamaRunner(tiny_model("llama", hidden=256).to(torch.bfloat16))
    runner.measured_cost = dict(TABLE)
    return runner


def test_a_shape_dependent_result_fails_the_probe_and_keeps_the_single_shape():
    """Kernels that round per shape must never get mixed shapes: the probe sees it and nothing changes."""
    runner = bf16_runner()
    runner.set_fixed_rows(4)
    head = runner.lm_head

    class ShapeDependent:
        def __getattr__(self, name):
            return getattr(head, name)

        def __call__(self, x, row_major):  # a result that depends on how many rows the step had
            return head(x, row_major) + 1e-2 * x.shape[0]

    runner.lm_head = ShapeDependent()
    assert not runner.mixed_shapes_exact(16)
    assert runner.set_mixed_rows(16, least=4) is False
    assert runner.fixed_rows == 4 and not runner.mixed_shapes
    assert runner.step_cost == {n: TABLE[4] for n in range(1, 5)}  # still the flat single-shape table


def test_mixed_shapes_price_each_size_and_single_shapes_turn_them_off(monkeypatch):
    runner = bf16_runner()
    monkeypatch.setattr(runner, "mixed_shapes_exact", lambda rows: True)
    runner.plan = {n: (n + (n % 2), False) for n in range(1, 17)}  # odd sizes padded by one row
    assert runner.set_mixed_rows(16, least=4)
    assert runner.fixed_rows == 16 and runner.mixed_shapes and runner.mixed_least == 4
    assert runner.step_cost == {n: TABLE[max(n, 4)] for n in range(1, 17)}
    assert [runner._fixed_shape(n)[0] for n in (1, 3, 4, 5, 7, 16)] == [4, 4, 4, 6, 8, 16]
    runner.set_fixed_rows(4)  # an explicit single shape wins and flattens the table again
    assert not runner.mixed_shapes and runner.step_cost == {n: TABLE[4] for n in range(1, 5)}
    assert runner._fixed_shape(1)[0] == 4
    with pytest.raises(DraftsmithError, match="fixed rows"):
        runner.set_mixed_rows(17)
    runner.measured_cost = {}
    assert not runner.set_mixed_rows(16)  # no calibrated table: nothing to pick shapes from


def test_where_the_probe_passes_long_drafts_stay_identical_to_plain_decoding():
    """On a CPU whose bf16 kernels give every shape the same rows (a Xeon with AMX),
    drafts longer than the single shape allows verify in their own shapes and change nothing."""
    runner = bf16_runner()
    if not runner.set_mixed_rows(16, least=4):
        pytest.skip("this CPU's bf16 kernels round differently per step shape: mixed shapes stay off")
    # the verdict is real: a 9-row step's rows equal the same tokens' rows in a 4-row step
    ids = prompt(n=40)
    runner.reset(80)
    runner.forward(ids[:30], n_logits=0)
    nine = runner.forward(ids[30:39], n_logits=9).logits
    runner.rollback(30)
    fours = torch.cat([runner.forward(ids[a : a + 3], n_logits=3).logits for a in (30, 33, 36)])
    assert torch.equal(nine, fours)
    draft = perturbed_copy(runner.model, 0.05).to(torch.bfloat16)
    for seed in range(2):
        ids = prompt(seed)
        expected = speculative_generate(runner, PlainDrafter(), ids, StopRule(48)).tokens
        for drafter in (NgramDrafter(k=8, max_ngram=3), DraftModelDrafter(draft, VOCAB, k=8)):
            res = speculative_generate(runner, drafter, ids, StopRule(48), adaptive=False)
            assert res.tokens == expected, (drafter.name, seed)
            if drafter.name != "ngram":
                assert len(res.stats.drafted_at) > 3, "drafts longer than the single 4-row shape allows"


def test_the_probe_verdict_is_kept_with_the_calibration_and_a_new_plan_probes_again(monkeypatch, tmp_path):
    monkeypatch.setenv("DRAFTSMITH_DATA", str(tmp_path))
    monkeypatch.setattr("draftsmith.engine.lean_llama.cacheable", lambda *a: True)
    runner = LeanLlamaRunner(tiny_model("llama", hidden=256).to(torch.bfloat16))
    real = runner.calibrate
    runner.calibrate = lambda: real(max_rows=16, context=16, repeats=1)
    runner.calibrate_cached()
    verdict = runner.mixed_shapes_exact(16)
    (path,) = (tmp_path / "calibration").glob("*.json")
    assert json.loads(path.read_text())["mixed_exact"] == {"16": verdict}
    again = LeanLlamaRunner(runner.model)
    probes = []
    monkeypatch.setattr(again, "_probe_mixed", lambda rows: probes.append(rows) or verdict)
    again.calibrate_cached()
    assert again.mixed_shapes_exact(16) == verdict and not probes  # read back, not probed
    runner.calibrate_cached(force=True)  # a new plan: the old verdict is gone from memory and disk
    assert 16 not in runner._mixed_exact and "mixed_exact" not in json.loads(path.read_text())


def test_fixed_rows_option_takes_mixed_and_names_the_choices():
    from draftsmith.engine.step_shapes import MIXED_ROWS, parse_fixed_rows

    assert parse_fixed_rows("auto") is None and parse_fixed_rows("mixed") == MIXED_ROWS
    assert parse_fixed_rows("0") == 0 and parse_fixed_rows("6") == 6
    for bad in ("1", "17", "four", "-2", ""):
        with pytest.raises(ValueError, match="auto, mixed, 0 \\(off\\) or 2..16"):
            parse_fixed_rows(bad)


def test_a_target_asked_for_mixed_shapes_falls_back_to_the_auto_shape_with_a_warning(monkeypatch, caplog):
    from conftest import IdTokenizer

    from draftsmith.models.target import Target

    target = Target(tiny_model("llama", hidden=256).to(torch.bfloat16), IdTokenizer(), fixed_rows="mixed")
    runner = target.runner
    assert runner.fixed_rows == 4 and not runner.mixed_shapes  # no calibrated table: nothing to pick from
    runner.measured_cost = dict(TABLE)
    monkeypatch.setattr(runner, "mixed_shapes_exact", lambda rows: False)
    with caplog.at_level("WARNING", logger="draftsmith"):
        target.set_fixed_rows("mixed")
    assert "running every step as 4 rows" in caplog.text
    assert runner.fixed_rows == 4 and not runner.mixed_shapes
    monkeypatch.setattr(runner, "mixed_shapes_exact", lambda rows: True)
    target.set_fixed_rows("mixed")
    assert runner.fixed_rows == 16 and runner.mixed_shapes and runner.mixed_least == 4
    target.set_fixed_rows(None)  # auto: the single shape
    assert runner.fixed_rows == 4 and not runner.mixed_shapes
    fp32 = Target(tiny_model("llama"), IdTokenizer(), fixed_rows="mixed")
    assert fp32.runner.fixed_rows == 0  # fp32: free shapes are exact already, nothing to mix
