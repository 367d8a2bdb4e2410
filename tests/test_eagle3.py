"""EAGLE-3 on tiny models: lossless chain decoding, train/inference agreement, the generic trainer,
checkpoints and bad input."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import VOCAB, tiny_target

from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions
from draftsmith.drafters.eagle3.checkpoint import load_drafter, save_drafter
from draftsmith.drafters.eagle3.config import pick_layers
from draftsmith.drafters.eagle3.drafter import Eagle3Drafter
from draftsmith.drafters.eagle3.model import Eagle3Model
from draftsmith.drafters.eagle3.recipe import Eagle3Options, drafter_config
from draftsmith.drafters.eagle3.training import TTTBatch, pad_anchors, ttt_forward, ttt_loss
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.sampling import SamplingParams
from draftsmith.errors import DraftsmithError
from draftsmith.models.target import Target

ARCHS = ["llama", "qwen3"]
LAYERS = [1, 2, 3]


def make_model(
    target: Target, draft_vocab: int | None = None, seed: int = 0, scale: float = 1.0
) -> Eagle3Model:
    """A randomly initialised drafter; scale > 1 sharpens its logits (more confident guesses)."""
    opts = Eagle3Options(target_layers="1,2,3", draft_vocab=draft_vocab or 0, ttt_steps=4)
    model = Eagle3Model(drafter_config(target, opts, LAYERS))
    model.init_weights(seed)
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    if draft_vocab:
        model.set_draft_vocab(torch.arange(VOCAB - draft_vocab, VOCAB))  # a reduced vocabulary (top ids)
    model.attach_target(
        target.model.get_input_embeddings().weight, target.model.get_output_embeddings().weight
    )
    return model.eval()


def target_batch(target: Target, ids: torch.Tensor, anchors: list[int], layers=LAYERS) -> TTTBatch:
    """One sequence laid out for the training path, with target states from a plain HF forward."""
    with torch.no_grad():
        out = target.model(ids[None], output_hidden_states=True)
    feats = torch.cat([out.hidden_states[i] for i in layers], -1)
    a, live = pad_anchors([torch.tensor(anchors)])
    return TTTBatch(ids[None], torch.ones(1, len(ids), dtype=torch.bool), feats, a, live)


def prompt(seed: int, n: int = 12) -> torch.Tensor:
    return torch.randint(3, VOCAB, (n,), generator=torch.Generator().manual_seed(seed))


def test_weights_follow_the_sglang_eagle3_names_and_shapes():
    target = tiny_target()
    model = make_model(target, draft_vocab=64)
    c, h = model.cfg, 64
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    nh_hd, nkv_hd = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    assert shapes == {
        "fc.weight": (h, 3 * h),
        "midlayer.self_attn.q_proj.weight": (nh_hd, 2 * h),
        "midlayer.self_attn.k_proj.weight": (nkv_hd, 2 * h),
        "midlayer.self_attn.v_proj.weight": (nkv_hd, 2 * h),
        "midlayer.self_attn.o_proj.weight": (h, nh_hd),
        "midlayer.mlp.gate_proj.weight": (c.intermediate_size, h),
        "midlayer.mlp.up_proj.weight": (c.intermediate_size, h),
        "midlayer.mlp.down_proj.weight": (h, c.intermediate_size),
        "midlayer.hidden_norm.weight": (h,),
        "midlayer.input_layernorm.weight": (h,),
        "midlayer.post_attention_layernorm.weight": (h,),
        "norm.weight": (h,),
        "lm_head.weight": (64, h),
        "d2t": (64,),
        "t2d": (VOCAB,),
    }
    sd = model.state_dict()
    ids = torch.arange(64) + sd["d2t"]  # speculators' offsets convention
    assert ids.tolist() == list(range(VOCAB - 64, VOCAB))
    assert sd["t2d"].dtype == torch.bool and sd["t2d"].nonzero().flatten().tolist() == ids.tolist()


def test_layer_choice_maps_vllms_default_onto_the_cache():
    assert pick_layers(30, [2, 9, 15, 21, 28]) == [2, 15, 28]  # vLLM's [2, 15, 27] -> nearest cached
    assert pick_layers(36, [2, 10, 18, 26, 34]) == [2, 18, 34]
    assert pick_layers(30, [2, 9, 15, 21, 28], "2,9,28") == [2, 9, 28]
    with pytest.raises(DraftsmithError, match="not in the training data"):
        pick_layers(30, [2, 9, 15], "2,9,27")
    with pytest.raises(DraftsmithError, match="comma list"):
        pick_layers(30, [2, 9, 15], "low,mid")


@pytest.mark.parametrize("arch,draft_vocab", [("llama", None), ("qwen3", None), ("llama", 64), ("qwen3", 64)])
def test_greedy_chain_decoding_is_token_identical_to_plain(arch, draft_vocab):
    target = tiny_target(arch)
    drafter = Eagle3Drafter.build(target, TrainedDecodeOptions(drafter=make_model(target, draft_vocab)), k=4)
    assert drafter.hidden_layers == (1, 2, 3) and drafter.default_k == 4
    for seed in range(2):
        ids = prompt(seed)
        plain = speculative_generate(target.runner, PlainDrafter(), ids, StopRule(40))
        res = speculative_generate(target.runner, drafter, ids, StopRule(40))
        assert res.tokens == plain.tokens, (arch, seed)
        assert res.stats.drafted > 0
    one = speculative_generate(target.runner, drafter, ids[:1], StopRule(10))  # no target state yet
    assert one.tokens == speculative_generate(target.runner, PlainDrafter(), ids[:1], StopRule(10)).tokens


def test_a_drafter_that_guesses_right_is_accepted_and_still_lossless():
    """Multi-token acceptance exercises accept() appending several positions at once: a drafter
    trained a little on the target's own greedy text gets whole chains accepted."""
    target = tiny_target()
    model = make_model(target)
    ids = torch.stack([prompt(s, 8) for s in range(4)])
    with torch.no_grad():
        seqs = target.model.generate(
            ids, max_new_tokens=32, do_sample=False, eos_token_id=None, pad_token_id=0
        )
    batch = [target_batch(target, s, list(range(8, 38))) for s in seqs]
    model.train().requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(60):
        loss = sum(ttt_loss(model, b, 3, label="token")[0] for b in batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    drafter = Eagle3Drafter.build(
        target, TrainedDecodeOptions(drafter=model.eval().requires_grad_(False)), k=3
    )
    for s in range(4):
        plain = speculative_generate(target.runner, PlainDrafter(), seqs[s, :10], StopRule(30))
        res = speculative_generate(target.runner, drafter, seqs[s, :10], StopRule(30), adaptive=False)
        assert res.tokens == plain.tokens
    assert res.stats.accepted > res.stats.rounds  # more than one token accepted per round on average


@pytest.mark.parametrize("arch", ARCHS)
def test_sampling_runs_and_a_seed_reproduces_it(arch):
    target = tiny_target(arch)
    drafter = Eagle3Drafter.build(
        target, TrainedDecodeOptions(drafter=make_model(target, 64, scale=3.0)), k=3
    )
    p = SamplingParams(temperature=0.8, top_p=0.95, seed=7)
    a = speculative_generate(target.runner, drafter, prompt(1), StopRule(30), p)
    b = speculative_generate(target.runner, drafter, prompt(1), StopRule(30), p)
    assert a.tokens == b.tokens and len(a.tokens) == 30 and a.stats.drafted > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_inference_drafts_equal_the_training_path(arch):
    """What the drafter proposes while decoding is what TTT optimises: for every round, the
    training layout (context pass over the whole sequence, the chain unrolled from the anchor on
    its own argmax tokens) gives the same draft."""
    target = tiny_target(arch)
    model = make_model(target, draft_vocab=64, scale=3.0)
    rounds = []

    class Recording(Eagle3Drafter):
        def propose(self, tokens, k, params, generator):
            draft = super().propose(tokens, k, params, generator)
            rounds.append((tokens.clone(), draft.tokens.clone()))
            return draft

    drafter = Recording.build(target, TrainedDecodeOptions(drafter=model), k=4)
    speculative_generate(target.runner, drafter, prompt(2, 10), StopRule(30), adaptive=False)
    assert len(rounds) > 3
    with torch.no_grad():
        for tokens, draft in rounds:
            logits = ttt_forward(model, target_batch(target, tokens, [len(tokens) - 1]), 4, tokens="draft")
            want = model.draft_ids[logits[0, 0].argmax(-1)][: len(draft)]  # short drafts near the end
            assert want.tolist() == draft.tolist()


def test_incremental_context_equals_one_pass():
    """accept() appending 3, then 1, then 4 positions gives the cache and drafts of one start()."""
    target = tiny_target()
    model = make_model(target, scale=3.0)
    ids = prompt(4, 16)
    with torch.no_grad():
        hs = target.model(ids[None], output_hidden_states=True).hidden_states
    hidden = {i: hs[i][0] for i in LAYERS}
    whole = Eagle3Drafter(model, VOCAB, k=4)
    whole.start(ids, {i: h[:15] for i, h in hidden.items()}, 40)
    step = Eagle3Drafter(model, VOCAB, k=4)
    step.start(ids[:8], {i: h[:7] for i, h in hidden.items()}, 40)
    for lo, hi in ((7, 10), (10, 11), (11, 15)):
        step.accept(ids[: hi + 1], hi - lo, {i: h[lo:hi] for i, h in hidden.items()})
    assert step.n_ctx == 7 and len(step.pending) == 3  # queued until the next draft
    step.flush(ids)
    assert step.n_ctx == whole.n_ctx == 15
    torch.testing.assert_close(step.ctx_k[:, :, :15], whole.ctx_k[:, :, :15])
    greedy = SamplingParams()
    assert (
        step.propose(ids, 4, greedy, None).tokens.tolist()
        == whole.propose(ids, 4, greedy, None).tokens.tolist()
    )


def test_ttt_steps_see_only_the_context_before_their_anchor_and_their_own_chain():
    target = tiny_target()
    model = make_model(target, scale=3.0)
    ids = prompt(5, 30)
    base = ttt_forward(model, target_batch(target, ids, [6, 14, 22]), 4)
    ids2 = ids.clone()
    ids2[18:] = (ids2[18:] + 7) % VOCAB  # later tokens (and, through the target, later states) change
    out = ttt_forward(model, target_batch(target, ids2, [6, 14, 22]), 4)
    torch.testing.assert_close(out[:, :2], base[:, :2])  # chains of anchors 6 and 14 read x <= 17
    assert not torch.allclose(out[:, 2], base[:, 2])


@pytest.mark.parametrize("label", ["token", "greedy", "soft"])
def test_training_steps_lower_the_loss(label):
    target = tiny_target()
    model = make_model(target, draft_vocab=64)
    ids = prompt(6, 40)
    with torch.no_grad():
        out = target.model(ids[None], output_hidden_states=True)
    batch = target_batch(target, ids, list(range(8, 36)))
    batch.loss_mask[:, :8] = False
    batch.final, batch.lse = out.hidden_states[-1], torch.logsumexp(out.logits, -1)
    batch.greedy = out.logits.argmax(-1)
    model.train().requires_grad_(True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        loss, m = ttt_loss(model, batch, 3, label=label)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(m["loss"])
    assert losses[-1] < 0.75 * losses[0]
    assert 1.0 <= m["tau_est_k3"] <= m["tau_est"] <= 4.0 and "tau_greedy" in m


def write_answers(path, n: int = 8) -> None:
    g = torch.Generator().manual_seed(1)
    rows = []
    for i in range(n):
        p, a = torch.randint(3, VOCAB, (6,), generator=g), torch.randint(3, VOCAB, (20,), generator=g)
        rows.append(
            {"id": f"p{i}", "prompt": " ".join(f"t{t}" for t in p), "answer": " ".join(f"t{t}" for t in a)}
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("arch", ARCHS)
def test_generic_trainer_trains_saves_and_reloads(tmp_path, arch):
    """(Exact resume: test_training_pipeline.py, for every trainable method.)"""
    from draftsmith.drafters.registry import trainable_methods
    from draftsmith.training.cache import TargetCache, build_cache
    from draftsmith.training.train import TrainConfig, train

    assert "eagle3" in trainable_methods()
    target = tiny_target(arch)
    write_answers(tmp_path / "answers.jsonl")
    build_cache(target, tmp_path / "answers.jsonl", tmp_path / "cache", [1, 2, 3], progress=False)
    cache = TargetCache(tmp_path / "cache", target)
    cfg = TrainConfig.from_flat(
        method="eagle3",
        steps=6,
        batch=2,
        anchors=6,
        ttt_steps=3,
        draft_vocab=48,
        target_layers="auto",
        eval_every=3,
        save_every=3,
        held_out=2,
        lr=3e-3,
    )
    train(target, cache, cfg, tmp_path / "straight", progress=False)
    a = torch.load(tmp_path / "straight" / "trainer_state.pt", weights_only=False)
    assert a["step"] == 6
    log = a["log"]
    assert {"held_out_tau", "held_out_tau_k3", "held_out_tau_greedy", "held_out_tau_greedy_k3"} <= set(log[2])
    assert all(1.0 <= log[2][k] <= 8.0 for k in ("held_out_tau", "held_out_tau_greedy"))
    # the saved drafter reloads with the trained weights and decodes losslessly
    model = load_drafter(tmp_path / "straight", target)
    assert model.cfg.target_layers == [1, 2, 2] and model.cfg.draft_vocab_size == 48  # vLLM [1, 2, 2]
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, a["model"][k], msg=k)
    # `draftsmith score`'s path: the recipe loads the saved drafter and reproduces the held-out tau
    from draftsmith.drafters.registry import recipe_for

    recipe = recipe_for("eagle3")
    scored = recipe.load(target, str(tmp_path / "straight"))
    assert recipe.score_layers(scored) == [1, 2, 2]  # what `score` computes; here: the cache's columns
    scored.source_layers = list(cache.layers)
    taus = recipe.evaluate(scored, [cache[6], cache[7]], recipe.score_options(scored, 6))
    assert taus["tau"] == pytest.approx(log[5]["held_out_tau"])
    drafter = Eagle3Drafter.build(target, TrainedDecodeOptions(drafter=str(tmp_path / "straight")))
    assert drafter.default_k == 3
    plain = speculative_generate(target.runner, PlainDrafter(), prompt(3), StopRule(30))
    assert speculative_generate(target.runner, drafter, prompt(3), StopRule(30)).tokens == plain.tokens


def test_trainer_loss_falls_on_the_targets_own_text(tmp_path):
    """A few steps of the generic trainer on greedy answers lower the loss (mean of the last
    steps below the first ones)."""
    from draftsmith.training.cache import TargetCache, build_cache
    from draftsmith.training.regenerate import RegenConfig, local_engine, regenerate
    from draftsmith.training.train import TrainConfig, train

    target = tiny_target()
    write_answers(tmp_path / "prompts.jsonl", n=6)
    regenerate(
        tmp_path / "prompts.jsonl",
        tmp_path / "answers.jsonl",
        local_engine(target, RegenConfig(max_new_tokens=24, temperature=0.0)),
        progress=False,
    )
    build_cache(target, tmp_path / "answers.jsonl", tmp_path / "cache", [1, 2, 3], progress=False)
    cfg = TrainConfig.from_flat(
        method="eagle3",
        steps=24,
        batch=4,
        anchors=8,
        ttt_steps=3,
        label="token",
        held_out=0,
        lr=1e-2,
        warmup=0.0,
    )
    res = train(target, TargetCache(tmp_path / "cache", target), cfg, tmp_path / "run", progress=False)
    log = [json.loads(x) for x in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    first, last = sum(r["loss"] for r in log[:4]) / 4, sum(r["loss"] for r in log[-4:]) / 4
    assert res["steps"] == 24 and last < 0.8 * first


def test_bad_input_is_a_clear_error(tmp_path):
    target = tiny_target()
    model = make_model(target, draft_vocab=64)
    save_drafter(model, tmp_path / "d")
    with pytest.raises(DraftsmithError, match="trained for target"):
        load_drafter(tmp_path / "d", tiny_target("qwen3", seed=5))
    with pytest.raises(DraftsmithError, match="not found"):
        Eagle3Drafter.build(target, TrainedDecodeOptions(drafter=str(tmp_path / "missing")))
    with pytest.raises(DraftsmithError, match="needs --drafter"):
        Eagle3Drafter.build(target)
    with pytest.raises(DraftsmithError, match="k must be >= 0"):
        Eagle3Drafter.build(target, TrainedDecodeOptions(drafter=str(tmp_path / "d")), k=-1)
    # k = 0 drafts nothing: plain decoding
    zero = Eagle3Drafter.build(target, TrainedDecodeOptions(drafter=str(tmp_path / "d")), k=0)
    res = speculative_generate(target.runner, zero, prompt(0), StopRule(12))
    assert res.stats.drafted == 0
    assert res.tokens == speculative_generate(target.runner, PlainDrafter(), prompt(0), StopRule(12)).tokens
    from draftsmith.drafters.dflash.drafter import DFlashDrafter

    with pytest.raises(DraftsmithError):  # another method's loader refuses it
        DFlashDrafter.build(target, DFlashDecodeOptions(drafter=str(tmp_path / "d")))
    (tmp_path / "d" / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(DraftsmithError, match="could not read"):
        load_drafter(tmp_path / "d", target)
    (tmp_path / "d" / "config.json").write_text(json.dumps({"format": "draftsmith-dflash/1"}))
    with pytest.raises(DraftsmithError, match="not a draftsmith EAGLE-3"):
        load_drafter(tmp_path / "d", target)
    for bad in (dict(ttt_steps=0), dict(label="argmax"), dict(step_decay=0.0), dict(init="target")):
        with pytest.raises(DraftsmithError):
            Eagle3Options(**bad)


def test_cli_flags_come_from_the_options():
    import argparse

    from draftsmith.cli.options import add_option_flags, options_from_args, training_options
    from draftsmith.drafters.registry import recipe_for

    parser = argparse.ArgumentParser()
    add_option_flags(parser, training_options())
    args = parser.parse_args(["--ttt-steps", "3", "--target-layers", "2,15,28", "--ttt-tokens", "draft"])
    opts = options_from_args(recipe_for("eagle3"), args)
    assert (opts.ttt_steps, opts.target_layers, opts.ttt_tokens, opts.label) == (
        3,
        "2,15,28",
        "draft",
        "soft",
    )
    with pytest.raises(DraftsmithError, match="do\\(es\\) not apply"):
        options_from_args(recipe_for("eagle3"), parser.parse_args(["--markov-rank", "8"]))
