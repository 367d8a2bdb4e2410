"""The vLLM round model: a curve of engine steps timed inside vLLM, each peer's drafting cost, and the
bench's tau give each vLLM peer's predicted speedup (no vLLM needed here)."""

from __future__ import annotations

import json

import pytest

from draftsmith.errors import DraftsmithError
from draftsmith.planning import vllm
from draftsmith.planning.verify_curve import predict


def test_the_curve_is_the_median_step_by_tokens_verified_drafting_excluded():
    runs = {
        "plain": {"steps": [[1, 0.010, 0.0], [1, 0.012, 0.0], [1, 0.011, 0.0]], "prefill_steps": []},
        "ngram-3": {
            "steps": [[4, 0.016, 0.001], [4, 0.017, 0.001], [4, 0.018, 0.001], [1, 0.011, 0.0]],
            "prefill_steps": [],
        },
        "ngram-7": {"steps": [[8, 0.03, 0.0]], "prefill_steps": []},  # too few full rounds: left out
    }
    curve = vllm.curve_from(runs, "test")
    assert curve.tokens == (1, 4)
    assert curve.seconds == pytest.approx((0.011, 0.016))
    with pytest.raises(DraftsmithError, match="too few"):
        vllm.curve_from({"ngram-3": runs["ngram-3"]}, "test")


def test_each_vllm_peer_is_predicted_from_its_tau_drafts_and_drafting_cost(tmp_path):
    curve = vllm.curve_from(
        {
            "plain": {"steps": [[1, 0.010, 0.0]] * 3, "prefill_steps": []},
            "ngram-3": {"steps": [[4, 0.016, 0.0]] * 3, "prefill_steps": []},
        },
        "test",
    )
    costs = {
        "vllm-eagle3": vllm.DraftCost("vllm-eagle3", 3, 0.004, 0.05),
        "vllm-ngram": vllm.DraftCost("vllm-ngram", 3, 0.0003, 0.05),
    }
    stats = {"rounds": 50, "drafted": 150, "accepted": 50, "new_tokens": 100}
    # n-gram: 60 rounds, 40 accepted drafts; vLLM's 2.0 tokens per drafted round: 40 rounds drafted
    # (3 tokens each, 120 in all) and 20 verified one token
    ngram = {"rounds": 60, "drafted": 120, "accepted": 40, "new_tokens": 100}
    bench = {
        "summaries": [
            {"suite": "code", "method": "vllm-eagle3", "tau": 2.0, "tau_drafted": 2.0, "speedup_median": 1.1},
            {"suite": "code", "method": "vllm-ngram", "tau": 1.67, "tau_drafted": 2.0, "speedup_median": 1.2},
            {"suite": "code", "method": "vllm-plain", "tau": None},
            {"suite": "code", "method": "dspark", "tau": 2.2},
        ],
        "records": [
            {"method": "vllm-eagle3", "suite": "code", "stats": stats},
            {"method": "vllm-ngram", "suite": "code", "stats": ngram},
        ],
    }
    (tmp_path / "b.json").write_text(json.dumps(bench))
    eagle, ng = vllm.compare(curve, costs, tmp_path / "b.json")
    assert (eagle.method, eagle.drafts, eagle.draft_ms, eagle.measured) == ("vllm-eagle3", 3.0, 4.0, 1.1)
    assert eagle.verify_ms == pytest.approx(16.0)  # every round drafted 3: V(4)
    assert eagle.predicted == pytest.approx(predict(curve, 2.0, 3.0, 0.004, 100, 0.05), abs=1e-3)
    # n-gram: a third of its rounds were 1-token steps, two thirds 4-token ones
    assert ng.drafts == 2.0 and ng.verify_ms == pytest.approx((10 + 2 * 16) / 3)
    assert ng.predicted == pytest.approx(
        predict(curve, 1.67, 2.0, 0.0003, 100, 0.05, verify_s=(0.010 + 2 * 0.016) / 3), abs=1e-3
    )
    report = vllm.report(curve, costs, [eagle, ng])
    assert "| code | vllm-eagle3 | 2.00 | 3.00 | 4.00 | 16.00 |" in report and "Break-even tau" in report


def test_plan_engine_vllm_errors_are_one_line(tmp_path, capsys):
    from draftsmith.cli import main

    assert main(["plan", "--engine", "vllm", "--measure", "--bench", str(tmp_path / "no.json")]) == 2
    assert "bench result not found" in capsys.readouterr().err


@pytest.mark.slow  # loads the real target (to tokenize and export the drafters it times)
def test_plan_measure_engine_vllm_prints_the_curve_drafting_and_predictions(tmp_path, capsys, monkeypatch):
    """The command's wiring, with vLLM's profile stood in by fixed timings (the profile itself runs in
    test_vllm.py): every configuration is asked for, and the report reads the bench."""
    from draftsmith.cli import main

    asked = []

    def fake_profile(model, dtype, runs, threads, log, timeout=900):
        asked.extend(r["name"] for r in runs)
        out = {}
        for r in runs:
            k = 1 if r["name"] in ("plain",) or r["name"].startswith("vllm-") else 1 + int(r["name"][6:])
            out[r["name"]] = {
                "steps": [[k, 0.010 + 0.001 * k, 0.002]] * 3,
                "prefill_steps": [[40, 0.03, 0.0]],
            }
        return out

    monkeypatch.setattr(vllm, "profile", fake_profile)
    monkeypatch.setattr("draftsmith.evaluation.vllm_peers.exported", lambda *a, **k: tmp_path / "d")
    bench = {
        "machine": {"dtype": "bfloat16"},
        "config": {"k": 3},
        "summaries": [{"suite": "all", "method": "vllm-eagle3", "tau": 1.7, "tau_drafted": 1.7}],
        "records": [
            {
                "method": "vllm-eagle3",
                "suite": "code",
                "stats": {"rounds": 10, "drafted": 30, "accepted": 7, "new_tokens": 17},
            }
        ],
    }
    (tmp_path / "b.json").write_text(json.dumps(bench))
    assert main(["plan", "--measure", "--engine", "vllm", "--bench", str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert asked == [
        "plain",
        *(f"ngram-{d}" for d in vllm.DRAFTS),
        "vllm-ngram",
        "vllm-eagle3",
        "vllm-dflash",
    ]
    assert (
        "| tokens in the step | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 |" in out
        and "| all | vllm-eagle3 | 1.70 |" in out
    )
