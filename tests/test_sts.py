"""STS: temperatures fitted left to right lower the ECE of the prefix survival; drafters apply them."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
from conftest import VOCAB, tiny_target
from test_dflash import make_drafter

from draftsmith.drafters.checkpoint import read_sts
from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.engine.sampling import SamplingParams
from draftsmith.errors import DraftsmithError
from draftsmith.evaluation.sts import Round, collect, cumulative_pairs, fit, report, save


def overconfident_rounds(n: int = 4000, scale: float = 3.0, seed: int = 0) -> list[Round]:
    """Rounds whose true per-slot acceptance is sigmoid(z) but whose head reports z * scale."""
    rng = random.Random(seed)
    rounds = []
    for _ in range(n):
        z = [rng.gauss(0.5, 1.5) for _ in range(3)]
        accepted = 0
        while accepted < 3 and rng.random() < 1 / (1 + math.exp(-z[accepted])):
            accepted += 1
        rounds.append(Round([x * scale for x in z], accepted))
    return rounds


def test_fit_recovers_the_temperature_and_lowers_the_ece():
    fit_on, held_out = overconfident_rounds(seed=0), overconfident_rounds(seed=1)
    for bias in (False, True):
        temps, biases = fit(fit_on, bias=bias)
        assert len(temps) == 3 and all(2.2 <= t <= 4.0 for t in temps)
        assert all(abs(b) <= 0.25 for b in biases) and (bias or biases == [0.0] * 3)
        rows = report(held_out, temps, biases)
        for row in rows:
            assert row["ece_after"] < row["ece_before"]
        assert rows[0]["ece_after"] < 0.03 < rows[0]["ece_before"]
    # a calibrated head keeps T near 1 and b near 0
    temps, biases = fit(overconfident_rounds(scale=1.0))
    assert all(0.8 <= t <= 1.25 for t in temps) and all(abs(b) <= 0.25 for b in biases)
    assert [a for a, _ in cumulative_pairs([Round([0.0, 0.0], 1)], (), 1)] == [0.25]
    assert [a for a, _ in cumulative_pairs([Round([0.0], 1)], (1.0,), 0, (math.log(3),))] == [
        pytest.approx(0.75)
    ]


def test_a_bias_fixes_an_offset_that_a_temperature_cannot():
    """A head that reports z + 1 (overconfident near 0.5, as a head that memorised its data is):
    temperatures alone leave most of the error, the fitted bias removes it."""

    def offset_rounds(seed: int) -> list[Round]:
        rounds = overconfident_rounds(scale=1.0, seed=seed)
        return [Round([x + 1.0 for x in r.logits], r.accepted) for r in rounds]

    fit_on, held_out = offset_rounds(0), offset_rounds(1)
    temps_only = report(held_out, *fit(fit_on, bias=False))
    temps, biases = fit(fit_on)
    with_bias = report(held_out, temps, biases)
    assert -1.25 <= biases[0] <= -0.75
    assert with_bias[0]["ece_after"] < 0.02 < temps_only[0]["ece_after"]
    assert with_bias[0]["mean_survival_after"] == pytest.approx(with_bias[0]["prefix_accept_rate"], abs=0.02)


def test_drafter_applies_stored_temperatures_and_collect_sees_raw_logits(tmp_path):
    target = tiny_target()
    model = make_drafter(target, dspark=True)
    plain = DSparkDrafter.build(target, DFlashDecodeOptions(drafter=model))
    scaled = DSparkDrafter(model, VOCAB, temperatures=(2.0, 0.5), biases=(0.5,))
    ids = torch.randint(3, VOCAB, (10,), generator=torch.Generator().manual_seed(0))
    for d in (plain, scaled):
        d.start(ids, {}, 64)
        d._append(
            {key: torch.zeros(len(ids) - 1, target.model.config.hidden_size) for key in d.hidden_layers}
        )
        d.propose(ids, 3, SamplingParams(), None)
    assert scaled.confidence_logits == plain.confidence_logits
    for i, (t, b) in enumerate(((2.0, 0.5), (0.5, 0.0), (1.0, 0.0))):
        assert scaled.confidences[i] == pytest.approx(
            torch.sigmoid(torch.tensor(plain.confidence_logits[i] / t + b)).item()
        )
    rounds = collect(target, scaled, [ids.tolist()], max_new_tokens=12)
    assert rounds and scaled.temperatures == (2.0, 0.5)  # restored after collecting raw logits
    assert scaled.biases == (0.5,)
    assert all(len(r.logits) >= 1 and 0 <= r.accepted <= len(r.logits) for r in rounds)

    path = save(tmp_path, [2.0, 0.5], {"prompts": 1}, [-0.5, 0.0])
    assert read_sts(tmp_path) == ((2.0, 0.5), (-0.5, 0.0)) and json.loads(path.read_text())["prompts"] == 1
    path.write_text(json.dumps({"temperatures": [2.0]}))  # written before biases were fitted
    assert read_sts(tmp_path) == ((2.0,), ())
    path.write_text("{}")
    with pytest.raises(DraftsmithError, match="not an STS file"):
        read_sts(tmp_path)
    for bad in ({"temperatures": [0.0]}, {"temperatures": [1.0], "biases": [float("nan")]}):
        path.write_text(json.dumps(bad))
        with pytest.raises(DraftsmithError, match="must be finite"):
            read_sts(tmp_path)
