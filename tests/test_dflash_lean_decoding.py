"""The lean decoding path of DFlash/DSpark: fused q/k/v weights and one greedy request's walk give
exactly what the general path gives (tokens, confidences, probabilities), with fewer op calls."""

from __future__ import annotations

import pytest
import torch
from conftest import VOCAB, tiny_target
from test_dflash import make_drafter

from draftsmith.drafters.dflash.checkpoint import save_drafter
from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions, DFlashDrafter
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.drafters.hybrid import HybridDecodeOptions
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.packing import pack_linears, packable_dtypes
from draftsmith.engine.sampling import SamplingParams


def _record(drafter, target, prompts, max_new: int = 24, params: SamplingParams | None = None):
    """Every round's draft (tokens and, sampled, its distributions), confidences and token
    probabilities, and each prompt's output."""
    rounds, outputs = [], []
    propose = drafter.propose

    def recorded(*a, **kw):
        draft = propose(*a, **kw)
        dists = None if draft.probs is None else draft.probs.tolist()
        rounds.append(
            (
                draft.tokens.tolist(),
                dists,
                drafter.confidences,
                drafter.confidence_logits,
                drafter.token_probs,
            )
        )
        return draft

    drafter.propose = recorded
    for ids in prompts:
        outputs.append(speculative_generate(target.runner, drafter, ids, StopRule(max_new), params).tokens)
    return rounds, outputs


@pytest.mark.parametrize("dspark", [False, True])
@pytest.mark.parametrize("threshold", [0.0, 0.4])
def test_the_lean_greedy_walk_drafts_what_the_general_walk_drafts(tmp_path, dspark, threshold):
    target = tiny_target()
    save_drafter(
        make_drafter(target, dspark=dspark, block=5, lookup_input=4 if dspark else 0), tmp_path / "d"
    )
    cls = DSparkDrafter if dspark else DFlashDrafter
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, VOCAB, (n,), generator=g) for n in (6, 11, 17)]
    prompts.append(torch.tensor([5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7]))  # lookup guesses match
    runs = []
    for lean in (True, False):
        drafter = cls.build(
            target, DFlashDecodeOptions(drafter=str(tmp_path / "d"), confidence_threshold=threshold)
        )
        drafter.lean_walk = lean
        runs.append(_record(drafter, target, prompts))
    (lean_rounds, lean_out), (general_rounds, general_out) = runs
    assert lean_out == general_out
    assert len(lean_rounds) == len(general_rounds) > len(prompts)
    assert lean_rounds == general_rounds  # tokens, confidences and probabilities, exactly
    if dspark and threshold:  # the confidence stop cut some drafts short of the block
        assert any(len(r[0]) < 4 and len(r[2]) > len(r[0]) for r in lean_rounds)


@pytest.mark.parametrize("dspark", [False, True])
def test_a_sampled_lean_walk_draws_what_the_general_walk_draws(tmp_path, dspark):
    """Same seed, same random draws in the same order: the same drafts, draft distributions and
    output; with a confidence stop the general walk drafts (and draws) less, so it keeps that case."""
    target = tiny_target()
    save_drafter(make_drafter(target, dspark=dspark, block=5), tmp_path / "d")
    cls = DSparkDrafter if dspark else DFlashDrafter
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(3, VOCAB, (n,), generator=g) for n in (7, 13)]
    params = SamplingParams(temperature=0.9, top_p=0.95, seed=11)
    runs = []
    for lean in (True, False):
        drafter = cls.build(target, DFlashDecodeOptions(drafter=str(tmp_path / "d")))
        drafter.lean_walk = lean
        runs.append(_record(drafter, target, prompts, params=params))
    assert runs[0] == runs[1]
    assert all(r[1] is not None and len(r[1]) == len(r[0]) for r in runs[0][0])


@pytest.mark.parametrize("dtype", packable_dtypes())
def test_fused_decoding_weights_give_bitwise_the_separate_projections(dtype):
    target = tiny_target()
    m = make_drafter(target, dspark=True, block=4).to(dtype)
    pack_linears(m)  # as decoding has them: each projection packed on its own
    ctx_in = torch.randn(1, 9, m.cfg.hidden_size, dtype=dtype)
    block_in = torch.randn(1, 4, m.cfg.hidden_size, dtype=dtype)
    layer = m.layers[0]
    with torch.no_grad():
        k, v = layer.project_context(ctx_in, torch.arange(9)[None])
        separate = (k, v, layer(block_in, torch.arange(9, 13)[None], k, v, None))
        m.fuse_for_decoding()
        assert layer.qkv_packed is not None and layer.kv_packed is not None
        k2, v2 = layer.project_context(ctx_in, torch.arange(9)[None])
        fused = (k2, v2, layer(block_in, torch.arange(9, 13)[None], k2, v2, None))
    for a, b in zip(separate, fused, strict=True):
        assert torch.equal(a, b)
    assert not any("packed" in name for name in m.state_dict())  # decoding weights are never saved


def test_a_loaded_drafter_drafts_with_fused_weights(tmp_path):
    target = tiny_target()
    save_drafter(make_drafter(target, dspark=True), tmp_path / "d")
    drafter = DSparkDrafter.build(target, DFlashDecodeOptions(drafter=str(tmp_path / "d")))
    assert all(layer.qkv_packed is not None for layer in drafter.model.layers)


def test_a_drafter_handed_in_to_train_gets_no_fused_weights():
    target = tiny_target()
    model = make_drafter(target, dspark=True)
    DSparkDrafter.build(target, DFlashDecodeOptions(drafter=model))
    assert all(layer.qkv_packed is None for layer in model.layers)


@pytest.mark.parametrize("greedy", [True, False])
def test_the_hybrids_hinted_rounds_walk_alike_lean_and_general(greedy):
    """The hybrid steers DSpark's walk with a lookup hint per slot: the lean walk applies it at the
    same slots with the same drafts so far, so every round drafts the same tokens."""
    from draftsmith.drafters.hybrid import HybridDrafter

    target = tiny_target()
    model = make_drafter(target, dspark=True, block=5)
    ids = torch.tensor([5, 6, 7, 8, 9, 10, 11, 12] * 2 + [5, 6, 13, 14, 6, 7])
    params = SamplingParams() if greedy else SamplingParams(temperature=0.8, seed=5)
    runs = []
    for lean in (True, False):
        drafter = HybridDrafter.build(target, HybridDecodeOptions(drafter=model))
        assert drafter.learned.slot_hint is not None
        drafter.learned.lean_walk = lean
        rounds = []
        propose = drafter.propose

        def recording(*a, drafter=drafter, rounds=rounds, propose=propose, **kw):
            draft = propose(*a, **kw)
            rounds.append((drafter.source, draft.tokens.tolist()))
            return draft

        drafter.propose = recording
        out = speculative_generate(target.runner, drafter, ids, StopRule(40), params, adaptive=False)
        runs.append((out.tokens, rounds))
    assert runs[0] == runs[1]
    assert any(source == "dspark" for source, _ in runs[0][1])
