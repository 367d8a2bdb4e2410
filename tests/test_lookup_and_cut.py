"""One DSpark for every engine: the prompt-lookup input dropped in training, at decoding
(`--no-lookup`) and at export (`export --no-lookup`), and frequency-ranked drafting (FR-Spec): the
head cut at load to the most frequent answer tokens, whose counts travel with the drafter."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import tiny_target
from test_export import TINY_PROMPTS, make, verifier
from test_training_pipeline import LAYERS, _tiny_block_config, tiny_cache

from draftsmith.drafters.dflash.checkpoint import load_drafter, save_drafter
from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions
from draftsmith.drafters.dflash.lookup import drop_lookup
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.drafters.dflash.recipe import drop_guesses
from draftsmith.drafters.dflash.training import build_blocks
from draftsmith.drafters.dflash.vocab import COUNTS_FILE, cut_vocab, frequent_ids
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.errors import DraftsmithError
from draftsmith.export import export_drafter
from draftsmith.export.variant import check, prepare
from draftsmith.training.train import HELD_OUT_FILE, TrainConfig, train

REPEATS = [[5, 17, 40, 9, 33, 5, 17, 40, 9, 12, 5, 17], [80, 81, 4, 4, 19, 55, 80, 81, 4, 4]]


def with_lookup(target, seed: int = 0) -> DFlashModel:
    """A random DSpark (every weight live) that also reads prompt-lookup guesses, with token counts."""
    base = make(target, dspark=True, seed=seed)
    model = DFlashModel(replace(base.cfg, lookup_input=3))
    model.load_state_dict(base.state_dict(), strict=False)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        model.lookup_in.weight.normal_(0.0, 2.0, generator=g)
        model.lookup_len.weight.normal_(0.0, 2.0, generator=g)
    vocab = target.runner.vocab_size
    model.token_counts = torch.randint(0, 1000, (vocab,), generator=g).numpy()
    model.attach_target(
        target.model.get_input_embeddings().weight, target.model.get_output_embeddings().weight
    )
    return model.eval().requires_grad_(False)


def rounds(target, options: DFlashDecodeOptions, prompts=REPEATS, n: int = 24) -> list[tuple]:
    """Every round's draft while decoding greedily, each decode checked against plain decoding."""
    seen: list[tuple] = []

    class Recording(DSparkDrafter):
        def propose(self, tokens, k, params, generator):
            d = super().propose(tokens, k, params, generator)
            seen.append((len(tokens), d.tokens.tolist()))
            return d

    drafter = Recording.build(target, options)
    for ids in prompts:
        ids = torch.tensor(ids)
        res = speculative_generate(target.runner, drafter, ids, StopRule(n), k=4, adaptive=False)
        assert res.tokens == speculative_generate(target.runner, PlainDrafter(), ids, StopRule(n)).tokens
    return seen


def test_no_lookup_drafts_exactly_what_the_export_without_it_drafts(tmp_path):
    target = tiny_target()
    model = with_lookup(target)
    save_drafter(model, tmp_path / "drafter")
    with pytest.raises(DraftsmithError, match="lookup_input"):  # refused unless asked by name
        export_drafter(model, "speculators", tmp_path / "refused", verifier(target))
    notes = prepare(tmp_path / "drafter", target, False, None, tmp_path / "plain")
    assert "not measured" in notes[0]  # no held-out scores were saved with this one
    export_drafter(
        load_drafter(tmp_path / "plain", target), "speculators", tmp_path / "spec", verifier(target)
    )
    exported = rounds(target, DFlashDecodeOptions(drafter=load_drafter(tmp_path / "spec", target)))
    no_lookup = rounds(target, DFlashDecodeOptions(drafter=model, lookup=False))
    assert exported == no_lookup and any(d for _, d in no_lookup)
    assert rounds(target, DFlashDecodeOptions(drafter=model)) != no_lookup  # the input is live here
    assert rounds(target, DFlashDecodeOptions(drafter=drop_lookup(model))) == no_lookup


def test_export_reports_what_leaving_the_lookup_out_costs(tmp_path):
    target = tiny_target()
    save_drafter(with_lookup(target), tmp_path / "drafter")
    scores = {
        "step": 300,
        "sequences": 120,
        "held_out_tau_greedy_k3": 2.1,
        "held_out_tau_greedy_k3_no_lookup": 1.8,
    }
    (tmp_path / "drafter" / HELD_OUT_FILE).write_text(json.dumps(scores))
    notes = prepare(tmp_path / "drafter", target, False, None, tmp_path / "plain")
    assert "1.800 against 2.100 with it (-0.300), on 120 held-out answers at training step 300" in notes[0]
    with pytest.raises(DraftsmithError, match="no prompt-lookup input"):  # refused before it loads
        check(tmp_path / "plain", "dspark", False, None)


def test_a_cut_vocabulary_keeps_every_kept_tokens_logit_and_every_markov_row():
    target = tiny_target()
    whole = drop_lookup(with_lookup(target))
    cut = cut_vocab(whole, 20)
    cut.attach_target(target.model.get_input_embeddings().weight, target.model.get_output_embeddings().weight)
    keep = frequent_ids(whole.d2t, whole.token_counts, 20)
    assert torch.equal(cut.d2t, keep) and cut.cfg.draft_vocab_size == 20
    assert set(keep.tolist()) == set(np.argsort(-whole.token_counts, kind="stable")[:20].tolist())
    states = torch.randn(7, whole.cfg.hidden_size)
    prev = torch.randint(0, target.runner.vocab_size, (7,))  # kept and cut tokens alike
    full = whole.base_logits(states) + whole.markov_bias(whole.prev_index(prev))
    mine = cut.base_logits(states) + cut.markov_bias(cut.prev_index(prev))
    torch.testing.assert_close(mine, full[:, keep])
    torch.testing.assert_close(
        cut.confidence_logit(states, cut.prev_index(prev)),
        whole.confidence_logit(states, whole.prev_index(prev)),
    )
    with pytest.raises(DraftsmithError, match="1..95"):
        cut_vocab(whole, 96)


def test_decoding_cuts_the_head_and_stays_lossless_and_exports_the_cut(tmp_path):
    target = tiny_target()
    model = drop_lookup(with_lookup(target))
    cut = rounds(target, DFlashDecodeOptions(drafter=model, draft_vocab=24))
    kept = set(frequent_ids(model.d2t, model.token_counts, 24).tolist())
    assert all(set(d) <= kept for _, d in cut) and any(d for _, d in cut)
    save_drafter(model, tmp_path / "drafter")
    assert (tmp_path / "drafter" / COUNTS_FILE).is_file()
    again = load_drafter(tmp_path / "drafter", target)
    assert np.array_equal(again.token_counts, model.token_counts)
    prepare(tmp_path / "drafter", target, True, 24, tmp_path / "cut")
    export_drafter(load_drafter(tmp_path / "cut", target), "speculators", tmp_path / "spec", verifier(target))
    assert rounds(target, DFlashDecodeOptions(drafter=load_drafter(tmp_path / "spec", target))) == cut
    bare = make(target, dspark=True)  # no counts: an explicit cut is refused, the default cuts nothing
    with pytest.raises(DraftsmithError, match="no token counts"):
        DSparkDrafter.build(target, DFlashDecodeOptions(drafter=bare, draft_vocab=24))
    assert rounds(target, DFlashDecodeOptions(drafter=bare), TINY_PROMPTS)


def test_lookup_dropout_removes_the_guesses_of_whole_blocks():
    ids = torch.tensor([[5, 6, 7, 5, 6, 7, 5, 6, 7, 5, 6, 7, 5, 6, 7, 5]] * 3)
    mask = torch.ones_like(ids, dtype=torch.bool)
    anchors = [torch.arange(3, 15)] * 3
    batch = build_blocks(ids, mask, anchors, 4, 0, lookup_input=3)
    assert batch.guess_lens.bool().view(3, 12, 4).any(-1).all()  # every block has a guess
    half = drop_guesses(batch, 4, 0.5, torch.Generator().manual_seed(0))
    blocks = half.guess_lens.view(3, 12, 4)
    live = blocks.bool().any(-1)
    assert torch.equal(blocks[live], batch.guess_lens.view(3, 12, 4)[live])  # a block keeps all or none
    assert 0.25 < live.float().mean() < 0.75
    assert not drop_guesses(batch, 4, 1.0, None).guess_lens.any()


def test_training_with_lookup_dropout_scores_both_ways_and_keeps_its_counts(tmp_path):
    target, cache = tiny_cache(tmp_path, n=6)
    cfg = TrainConfig.from_flat(**{**_tiny_block_config("dspark", steps=3).flat(), "lookup_input": 3})
    cfg = TrainConfig.from_flat(**{**cfg.flat(), "lookup_dropout": 0.5})
    train(target, cache, cfg, tmp_path / "run", progress=False)
    scores = json.loads((tmp_path / "run" / HELD_OUT_FILE).read_text())
    assert scores["step"] == 3 and {"held_out_tau_greedy_k3", "held_out_tau_greedy_k3_no_lookup"} <= set(
        scores
    )
    model = load_drafter(tmp_path / "run", target)
    assert np.array_equal(model.token_counts, cache.token_counts(target.runner.vocab_size))
    tuned = TrainConfig.from_flat(**{**cfg.flat(), "init_from": str(tmp_path / "run")})
    train(target, cache, tuned, tmp_path / "tuned", progress=False)  # counts add up over a lineage
    assert np.array_equal(load_drafter(tmp_path / "tuned", target).token_counts, 2 * model.token_counts)
    assert LAYERS  # the tiny cache's layers


def test_decoding_cuts_by_default_only_with_counts_that_rank_enough_tokens():
    """The default cut (8,192) needs counts of at least that many distinct tokens: a drafter trained on
    a few answers would otherwise keep mostly unseen tokens, ranked by nothing but their ids."""
    from draftsmith.drafters.dflash.vocab import DEFAULT_CUT, default_cut

    many = np.ones(49152, dtype=np.int64)
    few = np.zeros(49152, dtype=np.int64)
    few[:100] = 5
    assert default_cut(many, 49152) == DEFAULT_CUT
    assert default_cut(few, 49152) == 0 and default_cut(None, 49152) == 0
    assert default_cut(many, DEFAULT_CUT) == 0  # nothing to cut
