"""Growing a trained block drafter's draft vocabulary: old rows kept, new ones start neutral, lossless."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import VOCAB, tiny_target
from test_dflash import make_drafter

from draftsmith.drafters.dflash.vocab import grow_vocab, grown_ids
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.errors import DraftsmithError


def test_grown_ids_keep_the_old_and_add_the_most_frequent():
    counts = np.zeros(10, dtype=np.int64)
    counts[[7, 2, 9]] = [50, 40, 30]
    assert grown_ids([2, 5], counts, 4) == [2, 5, 7, 9]  # 2 is already there: 7 and 9 come next
    with pytest.raises(DraftsmithError, match="shrink"):
        grown_ids([2, 5, 7], counts, 2)
    with pytest.raises(DraftsmithError, match="exceeds"):
        grown_ids([2], counts, 11)


def test_grow_vocab_preserves_old_predictions_and_stays_lossless():
    target = tiny_target()
    model = make_drafter(target, dspark=True, draft_vocab=64)
    with torch.no_grad():  # a trained-looking Markov head (it starts at zero)
        model.markov_out.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(5))
    counts = np.arange(VOCAB, dtype=np.int64)[::-1].copy()  # low ids most frequent
    grown = grow_vocab(model, counts, 80)
    old, new = model.d2t.tolist(), grown.d2t.tolist()
    assert len(new) == 80 and set(old) <= set(new) and new == sorted(new)
    assert grown.cfg.draft_vocab_size == 80
    tm = target.model
    grown.attach_target(tm.get_input_embeddings().weight, tm.get_output_embeddings().weight)
    rows = grown.t2d[model.d2t]
    added = [i for i, t in enumerate(new) if t not in set(old)]
    prev = torch.tensor([0, 3, 63])  # previous tokens as old draft indices
    prev_new = grown.t2d[model.d2t[prev]]
    assert torch.equal(grown.markov_bias(prev_new)[:, rows], model.markov_bias(prev))
    assert torch.count_nonzero(grown.markov_bias(prev_new)[:, added]) == 0  # no bias for a new token yet
    outside_old = model.markov_in.weight[64]
    assert torch.equal(grown.markov_in.weight[added[0]], outside_old)  # a new token was "outside"
    assert torch.equal(grown.markov_in.weight[80], outside_old)
    for name, p in model.named_parameters():
        if not name.startswith("markov_"):
            assert torch.equal(p, dict(grown.named_parameters())[name]), name
    stop = StopRule(max_new_tokens=24)
    prompt = torch.randint(1, VOCAB, (12,), generator=torch.Generator().manual_seed(1))
    plain = speculative_generate(target.runner, PlainDrafter(), prompt, stop).tokens
    drafter = DSparkDrafter(grown.eval(), VOCAB)
    assert speculative_generate(target.runner, drafter, prompt, stop).tokens == plain
    whole = grow_vocab(model, counts, VOCAB)  # the whole vocabulary: no draft vocabulary left
    assert whole.cfg.draft_vocab_size is None and torch.equal(whole.d2t, torch.arange(VOCAB))


def test_grow_vocab_refuses_a_full_vocabulary_drafter():
    model = make_drafter(tiny_target(), dspark=True)
    with pytest.raises(DraftsmithError, match="whole target vocabulary"):
        grow_vocab(model, np.ones(VOCAB, dtype=np.int64), VOCAB)


def test_cli_grows_a_drafter_and_widens_it_to_the_whole_vocabulary(smollm, tmp_path, capsys):
    """grow-vocab on a reduced-vocabulary DSpark for the default target: by answer counts, or with
    --size 0 to the whole vocabulary, after which the z-lab / DeepSpec exporters take it."""
    from dataclasses import replace
    from pathlib import Path

    from draftsmith.cli import main
    from draftsmith.drafters.checkpoint import shipped_drafter
    from draftsmith.drafters.dflash.checkpoint import load_drafter, save_drafter
    from draftsmith.drafters.dflash.config import DFlashConfig
    from draftsmith.drafters.dflash.model import DFlashModel
    from draftsmith.export import export_drafter, verifier_of

    cfg = replace(DFlashConfig.load(shipped_drafter("dspark", smollm)), draft_vocab_size=512, lookup_input=0)
    reduced = DFlashModel(cfg)
    reduced.d2t = torch.arange(512) * 7  # spread over the vocabulary
    src = tmp_path / "reduced"
    save_drafter(reduced, src, dtype=torch.float32)
    answers = Path(__file__).resolve().parents[1] / "data/smollm2/answers-held-out-t0.jsonl.gz"
    out = tmp_path / "grown"
    base = ["grow-vocab", "--drafter", str(src), "--answers", str(answers), "--out", str(out)]
    assert main([*base, "--size", "100"]) == 2 and "shrink" in capsys.readouterr().err
    assert (
        main([*base[:-4], "--answers", str(tmp_path / "none.jsonl"), "--out", str(out), "--size", "900"]) == 2
    )
    assert "not found" in capsys.readouterr().err
    assert main([*base[:-4], "--out", str(out), "--size", "900"]) == 2
    assert "--answers is required" in capsys.readouterr().err
    assert main([*base, "--size", "612"]) == 0
    assert DFlashConfig.load(out).draft_vocab_size == 612
    whole = tmp_path / "whole"
    assert main(["grow-vocab", "--drafter", str(src), "--size", "0", "--out", str(whole)]) == 0
    model = load_drafter(whole, smollm)
    assert model.cfg.draft_vocab_size is None and torch.equal(
        model.d2t, torch.arange(smollm.runner.vocab_size)
    )
    export_drafter(model, "deepspec", tmp_path / "deepspec", verifier_of(smollm))  # no draft vocabulary left
