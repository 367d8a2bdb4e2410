"""Confidence calibration metrics used by the bench for DSpark's confidence head."""

from __future__ import annotations

import math

from draftsmith.evaluation.reliability import auroc, by_position, ece


def test_perfectly_calibrated_and_separating_scores():
    pairs = [(0.9, True)] * 9 + [(0.9, False)] + [(0.1, False)] * 9 + [(0.1, True)]
    assert abs(ece(pairs)) < 1e-9
    # 100 (accepted, rejected) pairs: 81 ordered right, 18 tied, 1 wrong -> 0.81 + 0.18 / 2
    assert abs(auroc(pairs) - 0.90) < 1e-9


def test_overconfident_scores_have_large_ece_and_chance_auroc():
    pairs = [(0.95, True)] * 5 + [(0.95, False)] * 5
    assert abs(ece(pairs) - 0.45) < 1e-9
    assert auroc(pairs) == 0.5  # all tied
    assert auroc([(0.2, False), (0.8, True)]) == 1.0 and auroc([(0.8, False), (0.2, True)]) == 0.0
    assert math.isnan(auroc([(0.5, True)]))


def test_by_position_groups_records():
    rows = by_position([(0, 0.8, True), (0, 0.6, False), (1, 0.5, True)])
    assert [r["position"] for r in rows] == [1, 2]
    assert rows[0]["n"] == 2 and rows[0]["accept_rate"] == 0.5


def test_matmul_table_covers_every_shape_dtype_and_row_count():
    from conftest import tiny_model

    from draftsmith.evaluation.matmul_bench import ROWS, markdown, matmul_table

    rows = matmul_table(tiny_model().config, repeats=2)
    assert len(rows) == 5 * 2 * len(ROWS)  # q,k,v / o / gate,up / down / lm_head, fp32 + bf16
    assert all(r["ms_in_out"] > 0 and r["ms_out_in"] > 0 for r in rows)
    assert markdown(rows).count("\n") == 2 + 10 - 1
