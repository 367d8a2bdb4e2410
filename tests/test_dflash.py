"""DFlash / DSpark drafters on tiny models: no leakage, learning, checkpoints, lossless decoding."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import VOCAB, tiny_target

from draftsmith.drafters.checkpoint import target_fingerprint
from draftsmith.drafters.dflash import training
from draftsmith.drafters.dflash.checkpoint import load_drafter, save_drafter
from draftsmith.drafters.dflash.config import DFlashConfig, default_target_layers
from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions, DFlashDrafter
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.drafters.dflash.training import block_forward, block_loss, build_blocks
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.drafters.hybrid import HybridDecodeOptions
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.sampling import SamplingParams
from draftsmith.errors import DraftsmithError
from draftsmith.models.target import Target
from draftsmith.training.anchors import sample_anchors, walk

MASK_ID = 0


def make_drafter(
    target: Target,
    dspark: bool,
    block: int = 4,
    draft_vocab: int | None = None,
    anchor_context: bool = False,
    markov_state: int = 0,
    lookup_input: int = 0,
) -> DFlashModel:
    c = target.model.config
    cfg = DFlashConfig(
        hidden_size=c.hidden_size,
        num_heads=4,
        num_kv_heads=2,
        head_dim=16,
        intermediate_size=128,
        target_layers=default_target_layers(c.num_hidden_layers, 2),
        mask_token_id=MASK_ID,
        target_vocab_size=target.runner.vocab_size,
        block_size=block,
        draft_vocab_size=draft_vocab,
        markov_rank=8 if dspark else 0,
        markov_state=markov_state,
        confidence=dspark,
        anchor_context=anchor_context,
        lookup_input=lookup_input,
        method="dspark" if dspark else "dflash",
        target_name=target.name,
        target_fingerprint=target_fingerprint(target),
    )
    model = DFlashModel(cfg)
    model.init_weights(0)
    if markov_state:  # a live state update (it starts as a no-op), so the tests see its effect
        with torch.no_grad():
            model.state_out.weight.normal_(0.0, 0.5, generator=torch.Generator().manual_seed(3))
    if lookup_input:  # live lookup weights (they start as a no-op), so the tests see the guesses
        with torch.no_grad():
            g = torch.Generator().manual_seed(4)
            model.lookup_in.weight.normal_(0.0, 1.0, generator=g)
            model.lookup_len.weight.normal_(0.0, 1.0, generator=g)
    if draft_vocab:
        model.d2t = torch.arange(VOCAB - draft_vocab, VOCAB)  # a reduced vocabulary (the top ids)
    model.attach_target(
        target.model.get_input_embeddings().weight, target.model.get_output_embeddings().weight
    )
    return model


def target_states(target: Target, ids: torch.Tensor, layers: list[int]):
    with torch.no_grad():
        out = target.model(ids, output_hidden_states=True)
    feats = torch.cat([out.hidden_states[i] for i in layers], -1)
    return feats, out.hidden_states[-1]


def greedy_sequences(target: Target, n: int = 4, length: int = 40) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(3, VOCAB, (n, 8), generator=g)
    with torch.no_grad():
        return target.model.generate(
            prompts, max_new_tokens=length - 8, do_sample=False, eos_token_id=None, pad_token_id=0
        )


def test_default_target_layers_match_deepspec():
    assert default_target_layers(36) == [2, 10, 18, 26, 34]  # DeepSpec ids [1, 9, 17, 25, 33] + 1
    assert default_target_layers(30) == [2, 9, 15, 21, 28]


def test_anchors_respect_the_loss_mask():
    mask = torch.tensor([0, 0, 1, 1, 1, 0, 1, 1], dtype=torch.bool)
    anchors = sample_anchors(mask, 10)
    assert anchors.tolist() == [2, 3, 6]


def test_blocks_see_only_context_before_their_anchor_and_their_own_block():
    target = tiny_target()
    model = make_drafter(target, dspark=True)
    ids = greedy_sequences(target, n=1, length=30)
    feats, _ = target_states(target, ids, model.cfg.target_layers)
    anchors = [torch.tensor([5, 12, 20])]
    batch = build_blocks(ids, torch.ones_like(ids, dtype=torch.bool), anchors, 4, MASK_ID)
    base = block_forward(model, batch, feats)
    # perturb everything at and after the middle anchor (features, later tokens): earlier block unchanged
    feats2 = feats.clone()
    feats2[:, 12:] += torch.randn_like(feats2[:, 12:])
    ids2 = ids.clone()
    ids2[:, 13:] = (ids2[:, 13:] + 7) % VOCAB
    batch2 = build_blocks(ids2, torch.ones_like(ids2, dtype=torch.bool), anchors, 4, MASK_ID)
    out = block_forward(model, batch2, feats2)
    torch.testing.assert_close(out[:, :4], base[:, :4])  # anchor 5 block
    torch.testing.assert_close(out[:, 4:8], base[:, 4:8])  # anchor 12 block: context < 12 unchanged
    assert not torch.allclose(out[:, 8:], base[:, 8:])  # anchor 20 block sees the perturbation
    # and a block's own mask tokens are bidirectional: changing the anchor changes every slot
    assert batch.mask[0, 0, 30 + 3] and batch.mask[0, 3, 30 + 0] and not batch.mask[0, 0, 30 + 4]


@pytest.mark.parametrize(
    "dspark,label,feature_weight", [(False, "token", 0.0), (True, "token", 0.0), (False, "soft", 1.0)]
)
def test_training_steps_lower_the_loss(dspark, label, feature_weight):
    target = tiny_target()
    model = make_drafter(target, dspark)
    ids = greedy_sequences(target)
    feats, final = target_states(target, ids, model.cfg.target_layers)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[:, :8] = False  # prompt tokens are not trained on
    g = torch.Generator().manual_seed(0)
    batch = build_blocks(ids, mask, [sample_anchors(m, 16, g) for m in mask], 4, MASK_ID)
    head = target.model.get_output_embeddings().weight
    model.requires_grad_(True)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    losses = []
    for _ in range(30):
        loss, metrics = block_loss(
            model, batch, feats, final, head, label=label, feature_weight=feature_weight
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(metrics["loss"])
    assert losses[-1] < 0.75 * losses[0]
    assert metrics["tau_est"] > 1.0
    assert 1.0 <= metrics["tau_est_k3"] <= min(4.0, metrics["tau_est"])  # 3 drafts accept at most 3
    if dspark:
        assert {"l1", "bce"} <= set(metrics)
    if feature_weight:
        assert "feat" in metrics


def test_slot_weights_cut_unverified_slots_and_weigh_by_survival():
    """loss_slots zeroes the slots a verifier never checks; survival multiplies each slot's decay by
    the drafter's probability of every earlier label in its block, and a label outside the draft
    vocabulary ends the block's survival."""
    model = make_drafter(tiny_target(), dspark=True, block=4)
    ids, mask = torch.arange(20)[None] % VOCAB, torch.ones(1, 20, dtype=torch.bool)
    batch = build_blocks(ids, mask, [torch.tensor([2, 9])], 4, MASK_ID)
    decay = torch.exp(-torch.arange(4.0) / model.cfg.gamma).repeat(2)[None]
    ce = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]])
    valid = torch.ones_like(ce, dtype=torch.bool)
    plain = training.slot_weights(model, batch, ce, valid)
    assert torch.allclose(plain, decay)
    cut = training.slot_weights(model, batch, ce, valid, loss_slots=3)
    assert torch.allclose(cut, decay * torch.tensor([1.0, 1, 1, 0, 1, 1, 1, 0]))
    valid[0, 5] = False  # block 2's second label is outside the draft vocabulary
    surv = training.slot_weights(model, batch, ce, valid, survival=True)
    before = torch.tensor([[0.0, 0.1, 0.3, 0.6, 0.0, 0.5, float("inf"), float("inf")]])
    assert torch.allclose(surv, decay * torch.exp(-before))
    model.requires_grad_(True)
    ids = greedy_sequences(tiny_target())
    feats, final = target_states(tiny_target(), ids, model.cfg.target_layers)
    mask = torch.ones_like(ids, dtype=torch.bool)
    g = torch.Generator().manual_seed(0)
    blocks = build_blocks(ids, mask, [sample_anchors(m, 8, g) for m in mask], 4, MASK_ID)
    head = tiny_target().model.get_output_embeddings().weight
    loss, _ = block_loss(model, blocks, feats, final, head, loss_slots=2, survival=True)
    loss.backward()  # the survival factor is detached: gradients flow through the slots' own terms
    assert torch.isfinite(loss) and model.fc.weight.grad is not None


def test_a_negative_loss_slot_count_is_refused():
    from draftsmith.drafters.dflash.recipe import DFlashOptions

    with pytest.raises(DraftsmithError, match="loss_slots must be >= 0"):
        DFlashOptions(loss_slots=-1)


def test_soft_labels_are_the_target_distribution_and_feature_loss_is_zero_on_the_target_states(monkeypatch):
    """Soft CE is minimised (= the target's entropy) by the target's own logits, and the feature
    regression is exactly zero when the draft states are the target's final states."""
    target = tiny_target()
    model = make_drafter(target, dspark=False)
    ids = greedy_sequences(target, n=1, length=24)
    feats, final = target_states(target, ids, model.cfg.target_layers)
    mask = torch.ones_like(ids, dtype=torch.bool)
    batch = build_blocks(ids, mask, [torch.tensor([5, 12])], 4, MASK_ID)
    head = target.model.get_output_embeddings().weight
    pos = batch.target_pos[..., None].expand(-1, -1, final.shape[-1])
    # the drafter's states ARE the target's final-norm states
    monkeypatch.setattr(training, "block_forward", lambda m, b, f: torch.gather(final, 1, pos))
    with torch.no_grad():
        _, m = block_loss(model, batch, feats, final, head, label="soft", feature_weight=1.0)
    p = torch.softmax(torch.gather(final, 1, pos) @ head.t(), -1)
    has = batch.labels != -100
    w = model.position_weights()[batch.slot].expand_as(has) * has
    entropy = (-(p * p.log()).sum(-1) * w).sum() / w.sum()
    assert m["feat"] == pytest.approx(0.0, abs=1e-7)
    assert m["ce"] == pytest.approx(float(entropy), rel=1e-4)


@pytest.mark.parametrize("dspark", [False, True])
def test_save_load_round_trip_and_target_check(tmp_path, dspark):
    target = tiny_target()
    model = make_drafter(target, dspark, draft_vocab=64)
    save_drafter(model, tmp_path / "d")
    again = load_drafter(tmp_path / "d", target)
    assert again.cfg == model.cfg
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        torch.testing.assert_close(a, b, msg=name)
    other = tiny_target("qwen3", seed=5)
    with pytest.raises(DraftsmithError, match="trained for target"):
        load_drafter(tmp_path / "d", other)
    with torch.no_grad():  # what a diverged run saves
        next(p for n, p in model.named_parameters() if n.startswith("fc")).fill_(float("nan"))
    save_drafter(model, tmp_path / "d")
    with pytest.raises(DraftsmithError, match="non-finite .NaN or inf. weights in fc"):
        load_drafter(tmp_path / "d", target)
    (tmp_path / "d" / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(DraftsmithError, match="could not read"):
        load_drafter(tmp_path / "d", target)
    with pytest.raises(DraftsmithError, match="not found"):
        load_drafter(tmp_path / "missing", target)


@pytest.mark.parametrize(
    "dspark,draft_vocab,anchor_context,markov_state,lookup_input",
    [
        (False, None, False, 0, 0),
        (True, None, False, 0, 0),
        (True, 64, True, 0, 0),
        (True, 64, False, 16, 0),
        (True, 64, False, 0, 3),
    ],
)
def test_decoding_with_block_drafters_is_lossless(
    dspark, draft_vocab, anchor_context, markov_state, lookup_input
):
    target = tiny_target()
    model = make_drafter(
        target,
        dspark,
        draft_vocab=draft_vocab,
        anchor_context=anchor_context,
        markov_state=markov_state,
        lookup_input=lookup_input,
    )
    cls = DSparkDrafter if dspark else DFlashDrafter
    drafter = cls.build(target, DFlashDecodeOptions(drafter=model))
    ids = torch.randint(3, VOCAB, (12,), generator=torch.Generator().manual_seed(1))
    plain = speculative_generate(target.runner, PlainDrafter(), ids, StopRule(40))
    res = speculative_generate(target.runner, drafter, ids, StopRule(40))
    assert res.tokens == plain.tokens
    assert res.stats.drafted > 0
    if dspark:
        assert drafter.confidences and all(0.0 <= c <= 1.0 for c in drafter.confidences)


@pytest.mark.parametrize("rule", ["prob", "history"])
def test_length_rules_are_lossless_and_cut_drafts_where_rows_cost(monkeypatch, rule):
    target = tiny_target()
    drafter = DSparkDrafter.build(
        target, DFlashDecodeOptions(drafter=make_drafter(target, True), length_rule=rule)
    )
    ids = torch.randint(3, VOCAB, (12,), generator=torch.Generator().manual_seed(1))
    plain = speculative_generate(target.runner, PlainDrafter(), ids, StopRule(40))
    drafted, asked = {}, {}
    propose = drafter.propose

    def spy(tokens, k, params, generator):
        asked[name].append(k)
        return propose(tokens, k, params, generator)

    monkeypatch.setattr(drafter, "propose", spy)
    costs = {"free": dict.fromkeys(range(1, 9), 0.01), "steep": {1: 0.01, **dict.fromkeys(range(2, 9), 9.0)}}
    for name, cost in costs.items():
        asked[name] = []
        monkeypatch.setattr(target.runner, "step_cost", cost)
        res = speculative_generate(target.runner, drafter, ids, StopRule(40))
        assert res.tokens == plain.tokens
        drafted[name] = res.stats.drafted
    assert drafted["free"] > 0 and drafted["steep"] < drafted["free"] / 4
    full = drafter.default_k
    if rule == "prob":  # never a draft that costs more than it buys; one probability a drafted slot
        assert drafted["steep"] == 0
        assert drafter.token_probs and all(0.0 < p <= 1.0 for p in drafter.token_probs)
        # where rows are steep the history rule says 0: the prob rule drafts 1 slot to judge, and the
        # full block only every 8th round (the history's exploration)
        assert sorted(set(asked["steep"])) == [1, full]
        assert asked["steep"].count(full) == len(asked["steep"]) // 8
    else:  # the history rule drafts nothing where rows are steep, but every 8th round
        assert set(asked["steep"]) == {full}
    with pytest.raises(DraftsmithError, match="length rule must be one of prob, history"):
        DSparkDrafter.build(
            target, DFlashDecodeOptions(drafter=make_drafter(target, True), length_rule="fast")
        )


def test_prob_rule_drafts_do_not_depend_on_the_clock(monkeypatch):
    """The prob rule prices a row from the step-cost table, not the request's measured rate: with a
    clock that jumps at random, two runs draft and verify exactly the same rows."""
    import random

    import draftsmith.engine.decode as decode

    target = tiny_target()
    drafter = DSparkDrafter.build(
        target, DFlashDecodeOptions(drafter=make_drafter(target, True), length_rule="prob")
    )
    monkeypatch.setattr(target.runner, "step_cost", {n: 0.01 * (1 + 0.3 * (n - 1)) for n in range(1, 9)})
    ids = torch.randint(3, VOCAB, (12,), generator=torch.Generator().manual_seed(2))
    runs = []
    for seed in (0, 1):
        clock = random.Random(seed)
        monkeypatch.setattr(decode, "now", lambda device, clock=clock: clock.uniform(0, 1e3))
        res = speculative_generate(target.runner, drafter, ids, StopRule(40))
        runs.append((res.tokens, res.stats.drafted, res.stats.accepted, res.stats.rounds))
    assert runs[0] == runs[1]


def test_hybrid_cuts_dspark_rounds_by_probability_and_verifies_lookups_whole(monkeypatch):
    from draftsmith.drafters.hybrid import HybridDrafter

    target = tiny_target()
    checkpoint = make_drafter(target, dspark=True)
    history = HybridDecodeOptions(drafter=checkpoint, length_rule="history")
    assert HybridDrafter.build(target, history).length_rule == "history"
    drafter = HybridDrafter.build(target, HybridDecodeOptions(drafter=checkpoint))
    assert drafter.length_rule == "prob"  # DSpark's default
    ids = torch.tensor([5, 6, 7, 8, 9, 10, 11, 12] * 3 + [5, 6, 7])
    plain = speculative_generate(target.runner, PlainDrafter(), ids, StopRule(40))
    rounds = []
    propose = drafter.propose

    def recording(*a, **kw):
        draft = propose(*a, **kw)
        rounds.append((drafter.source, list(drafter.token_probs), len(draft.tokens)))
        return draft

    monkeypatch.setattr(drafter, "propose", recording)
    steep = {1: 0.01, **dict.fromkeys(range(2, 9), 9.0)}
    monkeypatch.setattr(target.runner, "step_cost", steep)
    res = speculative_generate(target.runner, drafter, ids, StopRule(40))
    assert res.tokens == plain.tokens
    assert {s for s, _, _ in rounds} == {"ngram", "dspark"}
    for source, probs, _ in rounds:  # a lookup counts as sure; DSpark reports its own probabilities
        assert probs == [1.0] * drafter.default_k if source == "ngram" else all(0 < p <= 1 for p in probs)
    # rows this dear do not pay even for sure tokens: only exploration rounds verify
    assert res.stats.drafted <= len(rounds) // 8 * drafter.default_k

    rounds.clear()
    monkeypatch.setattr(target.runner, "step_cost", dict.fromkeys(range(1, 9), 0.01))
    res = speculative_generate(target.runner, drafter, ids, StopRule(40))
    assert res.tokens == plain.tokens
    assert any(s == "ngram" and n for s, _, n in rounds)
    assert res.stats.drafted == sum(n for _, _, n in rounds)  # free rows: nothing drafted is cut


def test_wrong_method_for_checkpoint_is_refused():
    target = tiny_target()
    with pytest.raises(DraftsmithError, match="use --method dspark"):
        DFlashDrafter.build(target, DFlashDecodeOptions(drafter=make_drafter(target, dspark=True)))
    with pytest.raises(DraftsmithError, match="needs --drafter"):
        DSparkDrafter.build(target)


@pytest.mark.parametrize(
    "dspark,anchor_context,markov_state,lookup_input",
    [
        (False, False, 0, 0),
        (True, False, 0, 0),
        (True, True, 0, 0),
        (True, False, 16, 0),
        (True, False, 0, 4),
    ],
)
def test_inference_drafts_equal_the_training_path(dspark, anchor_context, markov_state, lookup_input):
    """What the drafter proposes while decoding is what training optimised: for every round, the
    training layout (context before the anchor, anchored block, the slots' lookup guesses) gives the
    same greedy draft."""
    target = tiny_target()
    model = make_drafter(
        target,
        dspark,
        block=5,
        anchor_context=anchor_context,
        markov_state=markov_state,
        lookup_input=lookup_input,
    )
    if anchor_context:  # a visible anchor-state path: without it the test could pass with it ignored
        with torch.no_grad():
            model.fc.weight.mul_(4.0)
    rounds = []

    class Recording(DSparkDrafter if dspark else DFlashDrafter):
        def propose(self, tokens, k, params, generator):
            draft = super().propose(tokens, k, params, generator)
            rounds.append((tokens.clone(), draft.tokens.clone()))
            return draft

    drafter = Recording.build(target, DFlashDecodeOptions(drafter=model))
    ids = torch.randint(3, VOCAB, (10,), generator=torch.Generator().manual_seed(2))
    speculative_generate(target.runner, drafter, ids, StopRule(30))
    assert len(rounds) > 3
    guessed = 0
    with torch.no_grad():
        for tokens, draft in rounds:
            a = len(tokens) - 1
            feats, _ = target_states(target, tokens[None], list(model.cfg.target_layers))
            batch = build_blocks(
                tokens[None],
                torch.ones(1, len(tokens), dtype=torch.bool),
                [torch.tensor([a])],
                5,
                MASK_ID,
                lookup_input=lookup_input,
            )
            guessed += bool(lookup_input and batch.guess_lens.any())
            states = block_forward(model, batch, feats)[0]
            prev_id = tokens[-1]
            for s, want in enumerate(draft.tolist()):
                logits = model.base_logits(model.step_states(states[s], prev_id))
                prev = model.prev_index(prev_id)
                slot = logits + model.markov_bias(prev) if dspark else logits
                prev_id = model.d2t[slot.argmax()]
                assert int(prev_id) == want
    assert guessed or not lookup_input  # some rounds had a guess, so the path was exercised


def test_slot_guesses_are_the_lookup_continuation_with_its_match_length():
    """Slot k predicts anchor + k + 1, so it gets the continuation's k-th token; no match, no guess."""
    import numpy as np

    from draftsmith.drafters.dflash.lookup import slot_guesses

    ids, lens = slot_guesses(np.array([5, 6, 7, 8, 5, 6]), 4, 3)
    assert ids.tolist() == [7, 8, 5, 6] and lens.tolist() == [2, 2, 2, 2]
    ids, lens = slot_guesses(np.array([5, 6, 7, 6]), 4, 3)  # "6" once before: a 1-token match
    assert ids.tolist() == [7, 6, 0, 0] and lens.tolist() == [1, 1, 0, 0]
    ids, lens = slot_guesses(np.array([1, 2, 3]), 4, 3)
    assert ids.tolist() == [0, 0, 0, 0] and lens.tolist() == [0, 0, 0, 0]


def test_batch_guesses_lay_out_each_anchor_block_as_build_blocks_does():
    """The numpy layout a GPU job computes in a worker equals build_blocks' own guesses: block j of
    row i holds slot_guesses of the context through anchor j; padding anchors stay zero."""
    import numpy as np

    from draftsmith.drafters.dflash.lookup import batch_guesses, slot_guesses

    ids = torch.tensor([[5, 6, 7, 8, 5, 6, 7, 9, 5, 6, 7, 8], [1, 2, 3, 1, 2, 3, 1, 2, 0, 0, 0, 0]])
    mask = torch.ones_like(ids, dtype=torch.bool)
    anchors = [torch.tensor([4, 5, 8]), torch.tensor([5])]
    g_ids, g_lens = batch_guesses([r.numpy() for r in ids], [a.numpy() for a in anchors], 4, 3)
    assert g_ids.shape == (2, 12)
    assert g_ids[0, 4:8].tolist() == slot_guesses(ids[0, :6].numpy(), 4, 3)[0].tolist()
    assert g_ids[1, 4:].tolist() == [0] * 8 and g_lens[1, 4:].tolist() == [0] * 8  # padding anchors
    # "1 2 3" repeats: a 3-token match whose continuation stops at the anchor (3 guesses, not 4)
    assert g_ids[1, :4].tolist() == [1, 2, 3, 0] and g_lens[1, :4].tolist() == [3, 3, 3, 0]
    batch = build_blocks(ids, mask, anchors, 4, MASK_ID, lookup_input=3)
    assert np.array_equal(batch.guess_ids.numpy(), g_ids) and np.array_equal(batch.guess_lens.numpy(), g_lens)


def test_lookup_input_starts_as_a_no_op_and_a_fine_tune_grows_it():
    """A drafter gaining lookup guesses (zero-initialised) drafts exactly as the one it starts from,
    and its lookup weights get a gradient, so training can learn to use the guesses."""
    target = tiny_target()
    base = make_drafter(target, True, block=4)
    grown = DFlashModel(dataclasses.replace(base.cfg, lookup_input=3))
    missing = grown.load_state_dict(base.state_dict(), strict=False).missing_keys
    assert sorted(missing) == ["lookup_in.weight", "lookup_len.weight"]
    head = target.model.get_output_embeddings().weight
    grown.attach_target(target.model.get_input_embeddings().weight, head)
    ids = torch.tensor([[5, 6, 7, 8, 5, 6, 7, 9, 5, 6, 7, 8]])
    mask = torch.ones_like(ids, dtype=torch.bool)
    anchors = [torch.tensor([4, 5, 8])]
    feats, final = target_states(target, ids, list(base.cfg.target_layers))
    plain = build_blocks(ids, mask, anchors, 4, MASK_ID)
    with_guesses = build_blocks(ids, mask, anchors, 4, MASK_ID, lookup_input=3)
    assert with_guesses.guess_lens.any()
    with torch.no_grad():
        assert torch.allclose(block_forward(base, plain, feats), block_forward(grown, with_guesses, feats))
    loss, _ = block_loss(grown, with_guesses, feats, final, target_head=head)
    loss.backward()
    assert grown.lookup_in.weight.grad.abs().sum() > 0 and grown.lookup_len.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="lookup"):
        block_forward(grown, plain, feats)


def test_greedy_labels_score_what_greedy_decoding_accepts():
    target = tiny_target()
    model = make_drafter(target, dspark=True)
    ids = greedy_sequences(target, n=2)
    with torch.no_grad():
        greedy = target.model(ids).logits.argmax(-1)
    feats, final = target_states(target, ids, model.cfg.target_layers)
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[:, :8] = False
    anchors = [torch.tensor([9, 20, 30])] * 2
    batch = build_blocks(ids, mask, anchors, 4, MASK_ID, greedy)
    has = batch.labels != -100
    # on greedily decoded text the written token is the target's argmax at every position
    assert torch.equal(batch.greedy_labels[has], batch.labels[has])
    # on other text the two differ, and each slot's greedy label is the argmax at anchor + slot
    ids2 = ids.clone()
    ids2[:, 21] = (ids2[:, 21] + 5) % VOCAB
    with torch.no_grad():
        greedy2 = target.model(ids2).logits.argmax(-1)
    batch2 = build_blocks(ids2, mask, anchors, 4, MASK_ID, greedy2)
    assert batch2.greedy_labels[0, 4] == greedy2[0, 20] and batch2.labels[0, 4] == ids2[0, 21]
    # the written token 21 left the greedy path, so greedy decoding never sees the later slots' prefixes
    assert (batch2.greedy_labels[0, 5:8] == -100).all() and (batch2.labels[0, 5:8] != -100).all()
    head = target.model.get_output_embeddings().weight
    _, m_tok = block_loss(model, batch, feats, final, head)
    _, m_greedy = block_loss(model, batch, feats, final, head, label="greedy")
    assert m_tok["tau_greedy"] == m_tok["tau_est"]  # same labels on greedy text
    assert m_greedy["ce"] == pytest.approx(m_tok["ce"])
    with pytest.raises(ValueError, match="greedy tokens"):
        block_loss(model, build_blocks(ids, mask, anchors, 4, MASK_ID), feats, final, head, label="greedy")


def test_a_slot_hint_steers_the_markov_walk_at_every_slot():
    """A caller's per-slot hint (the hybrid's lookup) adds its bonus to one token's logit: a huge
    bonus makes DSpark draft that token, it sees the drafts so far, and no hint leaves drafts as they were."""
    target = tiny_target()
    d = DSparkDrafter.build(target, DFlashDecodeOptions(drafter=make_drafter(target, dspark=True)))
    ids = torch.tensor([3, 9, 4, 7, 5])
    target.runner.reset(16)
    hidden = target.runner.forward(ids, n_logits=0, hidden=d.hidden_layers).hidden
    d.start(ids, {key: h[:-1] for key, h in hidden.items()}, 64)
    before = d.propose(ids, 3, SamplingParams(), None).tokens.tolist()
    seen = []

    def hint(tokens, drafted):
        seen.append(list(drafted))
        return 11, 1e4

    d.slot_hint = hint
    assert d.propose(ids, 3, SamplingParams(), None).tokens.tolist() == [11, 11, 11]
    assert seen == [[], [11], [11, 11]]
    d.slot_hint = lambda tokens, drafted: None
    assert d.propose(ids, 3, SamplingParams(), None).tokens.tolist() == before


def test_hybrid_lookup_hint_follows_the_latest_short_match():
    from draftsmith.drafters.hybrid import lookup_hint
    from draftsmith.drafters.ngram import lookup

    seq = torch.tensor([1, 2, 8, 5, 1, 2, 9, 6, 1])
    assert lookup_hint(5, 4.0, seq, [2]) == (9, 4.0)  # "1 2" last followed by 9
    assert lookup_hint(5, 4.0, seq, [7]) is None  # "1 7" never occurred
    assert lookup_hint(5, 4.0, seq, []) is None  # "6 1" never occurred; a 1-token match is too short
    # the same match as the n-gram drafter's lookup (specified by its first, torch version), on random text
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        text = torch.randint(0, 4, (int(torch.randint(1, 40, (1,), generator=g)),), generator=g)
        cont, n = _lookup_by_windows(text, 1, 5, 2)
        expect = (int(cont[0]), 1.0) if n else None
        assert lookup_hint(5, 1.0, text[:-2], text[-2:].tolist()) == expect
        for k in (1, 3):
            got, m = lookup(text.numpy(), k, 3, 1)
            want, n = _lookup_by_windows(text, k, 3, 1)
            assert m == n and got.tolist() == want.tolist()


def _lookup_by_windows(tokens, k, max_ngram, min_ngram):
    """ngram.lookup's specification: every earlier n-gram compared with the suffix, longest first."""
    n_tok = tokens.shape[0]
    for n in range(min(max_ngram, n_tok - 1), min_ngram - 1, -1):
        windows = tokens[: n_tok - 1].unfold(0, n, 1)
        hits = (windows == tokens[n_tok - n :]).all(dim=1).nonzero()
        if hits.numel():
            starts = hits[:, 0] + n
            full = starts[starts + k <= n_tok]
            start = int(full[-1]) if full.numel() else int(starts[0])
            return tokens[start : start + k], n
    return tokens[:0], 0
    with pytest.raises(DraftsmithError, match="lookup bonus"):
        from draftsmith.drafters.hybrid import HybridDrafter

        target = tiny_target()
        HybridDrafter.build(
            target, HybridDecodeOptions(drafter=make_drafter(target, dspark=True), lookup_bonus=float("nan"))
        )


@pytest.mark.parametrize("bonus", [0.0, 4.0])
def test_hybrid_drafter_switches_sources_and_stays_lossless(bonus):
    from draftsmith.drafters.hybrid import HybridDrafter

    target = tiny_target()
    drafter = HybridDrafter.build(
        target, HybridDecodeOptions(drafter=make_drafter(target, dspark=True), lookup_bonus=bonus)
    )
    assert (drafter.learned.slot_hint is None) == (bonus == 0)
    sources = []
    propose = drafter.propose

    def recording(*a, **kw):
        draft = propose(*a, **kw)
        sources.append(drafter.source)
        return draft

    drafter.propose = recording
    # a prompt that repeats itself: the lookup finds long matches; fresh text falls back to DSpark
    ids = torch.tensor([5, 6, 7, 8, 9, 10, 11, 12] * 3 + [5, 6, 7])
    plain = speculative_generate(target.runner, PlainDrafter(), ids, StopRule(40))
    res = speculative_generate(target.runner, drafter, ids, StopRule(40), adaptive=False)
    assert res.tokens == plain.tokens
    assert sources[0] == "ngram"  # the prompt's suffix 5 6 7 occurred before
    assert "dspark" in sources  # fresh text falls back to DSpark
    p = SamplingParams(temperature=0.8, seed=3)
    a = speculative_generate(target.runner, drafter, ids, StopRule(30), p, adaptive=False)
    b = speculative_generate(target.runner, drafter, ids, StopRule(30), p, adaptive=False)
    assert a.tokens == b.tokens and len(a.tokens) == 30


def _blocks_by_loop(ids, loss_mask, anchors, block, mask_id):
    """build_blocks' specification, one anchor at a time (its first, loop-based version)."""
    b, t = ids.shape
    n = max(1, max(len(a) for a in anchors))
    q = n * block
    block_ids = torch.full((b, q), mask_id, dtype=torch.long)
    block_pos = torch.zeros(b, q, dtype=torch.long)
    labels = torch.full((b, q), training.IGNORE, dtype=torch.long)
    prev_ids = torch.zeros(b, q, dtype=torch.long)
    mask = torch.zeros(b, q, t + q, dtype=torch.bool)
    for i, anc in enumerate(anchors):
        for j in range(n):
            rows = slice(j * block, (j + 1) * block)
            mask[i, rows, t + j * block : t + (j + 1) * block] = True
            if j >= len(anc):
                continue
            a = int(anc[j])
            block_ids[i, j * block] = ids[i, a]
            pos = torch.arange(a, a + block)
            block_pos[i, rows] = pos
            nxt = pos + 1
            inside = nxt < t
            lab = torch.full((block,), training.IGNORE, dtype=torch.long)
            lab[inside] = torch.where(loss_mask[i, nxt[inside]], ids[i, nxt[inside]], training.IGNORE)
            labels[i, rows] = lab
            prev_ids[i, rows] = torch.where(pos < t, ids[i, pos.clamp(max=t - 1)], 0)
            mask[i, rows, :a] = True
    return block_ids, block_pos, labels, prev_ids, mask


def test_vectorised_block_layout_equals_the_one_anchor_at_a_time_layout():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(1, VOCAB, (3, 40), generator=g)
    mask = torch.rand(3, 40, generator=g) > 0.3
    mask[:, :5] = False
    # a short list (padding blocks), anchors whose block runs past the end, and an empty list
    anchors = [sample_anchors(mask[0], 9, g), torch.tensor([2, 37, 38]), torch.tensor([], dtype=torch.long)]
    got = build_blocks(ids, mask, anchors, 4, MASK_ID)
    want = _blocks_by_loop(ids, mask, anchors, 4, MASK_ID)
    for name, w in zip(("block_ids", "block_pos", "labels", "prev_ids", "mask"), want, strict=True):
        assert torch.equal(getattr(got, name), w), name


def test_block_layout_moves_to_the_training_device_whole():
    """A GPU trainer builds the layout next to its ids or moves it there: no field may stay behind
    (the CUDA path once moved the features but not the layout)."""
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(1, VOCAB, (2, 30), generator=g)
    mask = torch.ones_like(ids, dtype=torch.bool)
    greedy = torch.randint(1, VOCAB, (2, 30), generator=g)
    # every optional field filled (greedy labels, lookup guesses), so every field must travel
    anchors = [torch.tensor([3, 9]), torch.tensor([5])]
    batch = build_blocks(ids, mask, anchors, 4, MASK_ID, greedy, lookup_input=3)
    moved = batch.to("meta")
    tensors = [f.name for f in dataclasses.fields(batch) if isinstance(getattr(batch, f.name), torch.Tensor)]
    assert {"greedy_labels", "guess_ids", "guess_lens"} <= set(tensors)
    assert len(tensors) == len(dataclasses.fields(batch))
    for name in tensors:
        assert getattr(moved, name).device.type == "meta", name
        assert getattr(moved, name).shape == getattr(batch, name).shape, name
        assert getattr(batch, name).device.type == "cpu", name  # built where the ids live


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decoding_reads_rotary_angles_from_a_table_equal_to_the_computed_ones(dtype) -> None:
    """Decoding looks the rotary cos/sin up in a table; training computes them: the same values, so
    a drafter drafts with exactly the rotation it was trained with, at any position."""
    from draftsmith.drafters.dflash.model import rotate

    x = torch.randn(2, 3, 40, 16).to(dtype)
    pos = torch.randint(0, 5000, (2, 1, 40))
    with torch.no_grad():
        looked_up = rotate(x, pos, 10000.0)
    computed = rotate(x, pos, 10000.0)  # grad mode: the formula
    assert torch.equal(looked_up, computed)


def test_one_request_drafts_alike_with_and_without_the_padding_mask() -> None:
    """A single request (or contexts of one length) attends without a mask: all-True, the same
    drafts as the masked pass it replaces."""
    target = tiny_target()
    model = make_drafter(target, dspark=True)
    ids = torch.randint(1, VOCAB, (1, 4))
    pos = torch.arange(10, 14)[None]
    ctx = [(torch.randn(1, 2, 10, 16), torch.randn(1, 2, 10, 16)) for _ in model.layers]
    with torch.no_grad():
        free = model.backbone(ids, pos, ctx, None)
        masked = model.backbone(ids, pos, ctx, torch.ones(1, 4, 14, dtype=torch.bool))
    assert torch.allclose(free, masked, atol=1e-6)


def test_an_added_draft_layer_starts_as_the_identity_and_learns():
    """A fine-tune may deepen a trained drafter (`--layers 2 --init-from` a 1-layer one): the new
    layer's residual outputs start at zero, so it drafts exactly as the shallower drafter, and they
    get a gradient, so training can put the layer to work."""
    target = tiny_target()
    base = make_drafter(target, True, block=4)
    deeper = DFlashModel(dataclasses.replace(base.cfg, num_layers=base.cfg.num_layers + 1))
    missing = deeper.load_state_dict(base.state_dict(), strict=False).missing_keys
    new = base.cfg.num_layers
    assert missing and all(k.startswith(f"layers.{new}.") for k in missing)
    deeper.start_grown(set(missing))
    assert not deeper.layers[new].o.weight.any() and not deeper.layers[new].down.weight.any()
    assert deeper.layers[new].q.weight.any()  # the rest keeps its init
    head = target.model.get_output_embeddings().weight
    deeper.attach_target(target.model.get_input_embeddings().weight, head)
    ids = torch.tensor([[5, 6, 7, 8, 5, 6, 7, 9, 5, 6, 7, 8]])
    mask = torch.ones_like(ids, dtype=torch.bool)
    feats, final = target_states(target, ids, list(base.cfg.target_layers))
    batch = build_blocks(ids, mask, [torch.tensor([4, 5, 8])], 4, MASK_ID)
    with torch.no_grad():
        torch.testing.assert_close(block_forward(base, batch, feats), block_forward(deeper, batch, feats))
    loss, _ = block_loss(deeper, batch, feats, final, target_head=head)
    loss.backward()
    added = deeper.layers[new]
    assert added.o.weight.grad.abs().sum() > 0 and added.down.weight.grad.abs().sum() > 0


def test_the_walk_jumps_by_accepted_runs_and_stops_at_the_answer_end():
    # anchors 10..15, so the answer's last token is at 16; uncapped: 10 -> +4 -> 14 -> +1 -> 15 -> +1 -> 16
    runs = {10: 3, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0}
    assert walk(runs) == (6, 3)
    assert walk(runs, cap=1) == (6, 5)  # 10 -> 12 -> 13 -> 14 -> 15 -> 16
    assert walk({10: 2, 11: 0, 12: 5, 13: 0}) == (4, 2)  # 10 -> 13 -> 14: stops at the last token (14)
    assert walk({}) == (0, 0)
    assert walk({3: 0, 4: 0}) == (2, 2)  # nothing accepted: one token a round
