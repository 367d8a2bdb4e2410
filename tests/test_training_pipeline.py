"""Training pipeline on tiny models: resumable regeneration, the target cache, exact resume of training."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
from conftest import VOCAB, hf_target, tiny_target

from draftsmith.errors import DraftsmithError
from draftsmith.training.cache import TargetCache, build_cache, target_sequence, tokenize_row
from draftsmith.training.jsonl import read_rows
from draftsmith.training.regenerate import RegenConfig, local_engine, regenerate
from draftsmith.training.train import TrainConfig, train

LAYERS = [1, 2]


def write_prompts(path, n=6):
    g = torch.Generator().manual_seed(0)
    rows = [
        {
            "id": f"p{i}",
            "prompt": " ".join(f"t{t}" for t in torch.randint(3, VOCAB, (6,), generator=g).tolist()),
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_regeneration_resumes_without_losing_or_duplicating_rows(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts)
    out = tmp_path / "answers.jsonl"
    calls = []

    def flaky(rows):
        for r in rows:
            calls.append(r["id"])
            if len(calls) == 3:
                raise KeyboardInterrupt  # the user pressed Ctrl-C while the third prompt was in flight
            yield r, {"answer": f"t{len(r['id'])} t5", "finish_reason": "eos", "new_tokens": 2}

    with pytest.raises(KeyboardInterrupt):
        regenerate(prompts, out, flaky, progress=False)
    with out.open("a") as f:
        f.write('{"id": "p2", "answ')  # and the process died mid-write
    stats = regenerate(prompts, out, flaky, progress=False)
    ids = [r["id"] for r in read_rows(out)]
    assert ids == [f"p{i}" for i in range(6)]
    assert stats["skipped"] == 2 and stats["written"] == 4


def test_local_engine_writes_target_answers(tmp_path):
    target = tiny_target()
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts, n=2)
    out = tmp_path / "answers.jsonl"
    regenerate(prompts, out, local_engine(target, RegenConfig(max_new_tokens=8)), progress=False)
    rows = list(read_rows(out))
    assert len(rows) == 2 and all(r["answer"] and r["new_tokens"] <= 8 for r in rows)


def make_answers(tmp_path, n=6):
    rows = write_prompts(tmp_path / "prompts.jsonl", n)
    g = torch.Generator().manual_seed(1)
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps(
                {
                    **r,
                    "answer": " ".join(f"t{t}" for t in torch.randint(3, VOCAB, (20,), generator=g).tolist()),
                }
            )
            + "\n"
            for r in rows
        )
    )
    return answers


def tiny_cache(tmp_path, n: int = 6) -> tuple:
    """The tiny target and a cache of n of its answers (layers LAYERS), as most tests here need."""
    target = tiny_target()
    build_cache(target, make_answers(tmp_path, n=n), tmp_path / "cache", LAYERS, progress=False)
    return target, TargetCache(tmp_path / "cache", target)


def test_cache_round_trip_resume_and_target_check(tmp_path):
    target = tiny_target()
    answers = make_answers(tmp_path)
    sizes = []
    build_cache(target, answers, tmp_path / "cache", LAYERS, limit=3, shard_sequences=2, progress=False)
    manifest = build_cache(
        target,
        answers,
        tmp_path / "cache",
        LAYERS,
        shard_sequences=2,
        progress=False,
        confirm=lambda size, tokens, seqs: sizes.append(size) or True,
    )
    assert manifest["sequences"] == 6 and len(manifest["shards"]) == 4  # 2+1 kept, then 2+1 added
    assert sizes and sizes[0] > 0
    cache = TargetCache(tmp_path / "cache", target)
    row = next(iter(read_rows(answers)))
    ids, mask = tokenize_row(target, row, 1024)
    ref = target_sequence(target, ids, mask, LAYERS)
    got = cache[0]
    assert got.ids.tolist() == ids and got.loss_mask.tolist() == mask
    torch.testing.assert_close(got.features, ref.features, atol=2e-2, rtol=2e-2)  # fp16 storage
    torch.testing.assert_close(got.lse, ref.lse)
    other = tiny_target("qwen3", seed=3)
    with pytest.raises(DraftsmithError, match="built for"):
        TargetCache(tmp_path / "cache", other)
    with pytest.raises(DraftsmithError, match="other settings"):
        build_cache(target, answers, tmp_path / "cache", [1, 3], progress=False)
    rows = list(read_rows(answers))
    rows[0], rows[1] = rows[1], rows[0]  # the answers file was rewritten: resuming would mix rows up
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DraftsmithError, match="other rows"):
        build_cache(target, answers, tmp_path / "cache", LAYERS, shard_sequences=2, progress=False)


def _tiny_block_config(method: str, steps: int) -> TrainConfig:
    """A DFlash/DSpark run small enough for the tiny target: evaluated and saved every 3 steps."""
    return TrainConfig.from_flat(
        method=method,
        steps=steps,
        batch=2,
        anchors=4,
        block_size=4,
        markov_rank=8,
        draft_vocab=48,
        eval_every=3,
        save_every=3,
        held_out=2,
        lr=3e-3,
    )


TINY_OPTIONS = {
    "dflash": dict(anchors=4, block_size=4, draft_vocab=48),
    "dspark": dict(anchors=4, block_size=4, markov_rank=8, draft_vocab=48),
    "eagle3": dict(anchors=6, ttt_steps=3, draft_vocab=48, target_layers="auto"),
    "mtp": dict(unroll=2, draft_vocab=48),
    "medusa": dict(heads=3, draft_vocab=48),
    "distilled": dict(num_layers=2),
}
"""Per trainable method, options small enough for the tiny target."""


def test_every_trainable_method_has_a_tiny_resume_case():
    from draftsmith.drafters.registry import trainable_methods

    assert sorted(TINY_OPTIONS) == sorted(trainable_methods())


@pytest.mark.parametrize("method", sorted(TINY_OPTIONS))
def test_training_resume_continues_exactly(tmp_path, method):
    """A run interrupted at step 3 and resumed ends with the same weights as one that ran straight."""
    target = hf_target("llama") if method == "distilled" else tiny_target()  # its drafter saves a tokenizer
    answers = make_answers(tmp_path, n=8)
    build_cache(target, answers, tmp_path / "cache", [1, 2, 3], progress=False)
    cache = TargetCache(tmp_path / "cache", target)
    common = dict(steps=6, batch=2, eval_every=3, save_every=3, held_out=2, lr=3e-3)
    cfg = TrainConfig.from_flat(method=method, **common, **TINY_OPTIONS[method])
    train(target, cache, cfg, tmp_path / "straight", progress=False)
    train(target, cache, cfg, tmp_path / "resumed", progress=False, stop_after=3)  # interrupted at step 3
    assert torch.load(tmp_path / "resumed" / "trainer_state.pt", weights_only=False)["step"] == 3
    train(target, cache, cfg, tmp_path / "resumed", progress=False)  # picks up at step 4
    state = torch.load(tmp_path / "resumed" / "trainer_state.pt", weights_only=False)
    assert state["step"] == 6
    a = torch.load(tmp_path / "straight" / "trainer_state.pt", weights_only=False)
    assert a["step"] == 6
    for k in a["model"]:
        torch.testing.assert_close(a["model"][k], state["model"][k], msg=k)
    log = [json.loads(x) for x in (tmp_path / "straight" / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == 6 and all(math.isfinite(r["loss"]) for r in log)
    assert {"held_out_tau", "held_out_tau_k3", "held_out_tau_greedy", "held_out_tau_greedy_k3"} <= set(log[2])


def test_training_writes_tensorboard_curves_across_a_resume(tmp_path):
    """The event files hold every logged step's loss and the held-out scores, a resume appending."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    target, cache = tiny_cache(tmp_path, n=8)
    cfg = _tiny_block_config("dspark", steps=6)
    train(target, cache, cfg, tmp_path / "run", progress=False, stop_after=3)
    train(target, cache, cfg, tmp_path / "run", progress=False)
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard")).Reload()
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2, 3, 4, 5, 6]
    log = [json.loads(x) for x in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    tau = [(e.step, round(e.value, 4)) for e in events.Scalars("held_out/tau")]
    assert len(tau) == 2
    assert tau == [(r["step"], round(r["held_out_tau"], 4)) for r in log if "held_out_tau" in r]


def test_training_runs_compare_in_one_table(tmp_path):
    """An A/B arm that differs in one setting: the comparison table names it."""
    from draftsmith.evaluation.train_runs import curve, runs_table

    target, cache = tiny_cache(tmp_path, n=8)
    cfg = _tiny_block_config("dspark", steps=6)
    train(target, cache, cfg, tmp_path / "straight", progress=False)
    greedy = TrainConfig.from_flat(**{**cfg.flat(), "label": "greedy"})
    train(target, cache, greedy, tmp_path / "greedy", progress=False)
    table = runs_table([tmp_path / "straight", tmp_path / "greedy"])
    assert "| run | label | steps |" in table and "| greedy | greedy | 6 |" in table
    assert [s for s, _ in curve(tmp_path / "greedy")] == [3, 6]
    with pytest.raises(DraftsmithError, match="not a training run"):
        runs_table([tmp_path])


def test_init_from_starts_at_a_trained_drafter_and_refuses_another_architecture(tmp_path):
    from draftsmith.training.train import warm_start

    target, cache = tiny_cache(tmp_path, n=6)
    cfg = _tiny_block_config("dspark", steps=3)
    train(target, cache, cfg, tmp_path / "first", progress=False)
    recipe, opts = cfg.recipe, cfg.options
    trained = recipe.load(target, tmp_path / "first").state_dict()
    fresh = recipe.build(target, opts, LAYERS, cache)
    assert any(not torch.equal(fresh.state_dict()[k], v) for k, v in trained.items())
    warm_start(fresh, recipe, target, str(tmp_path / "first"))
    for k, v in trained.items():
        torch.testing.assert_close(fresh.state_dict()[k], v)
    # a fine-tune run: starts there, records where it started, and trains on
    tuned = TrainConfig.from_flat(**{**cfg.flat(), "init_from": str(tmp_path / "first"), "lr": 1e-3})
    train(target, cache, tuned, tmp_path / "tuned", progress=False, stop_after=2)
    saved = json.loads((tmp_path / "tuned" / "train_config.json").read_text())
    assert saved["init_from"] == str(tmp_path / "first")
    shutil.copytree(tmp_path / "first", tmp_path / "first-copy")
    shutil.rmtree(tmp_path / "first")  # a resume reads its own state, not the drafter it started from
    train(target, cache, tuned, tmp_path / "tuned", progress=False)
    assert torch.load(tmp_path / "tuned" / "trainer_state.pt", weights_only=False)["step"] == 3
    shutil.copytree(tmp_path / "first-copy", tmp_path / "first")
    with pytest.raises(DraftsmithError, match="another drafter.*target_layers"):
        warm_start(recipe.build(target, opts, [1, 3], cache), recipe, target, str(tmp_path / "first"))
    first = str(tmp_path / "first")
    wider = TrainConfig.from_flat(**{**cfg.flat(), "markov_rank": 16})
    with pytest.raises(DraftsmithError, match="another drafter.*markov_in.weight"):
        warm_start(recipe.build(target, wider.options, LAYERS, cache), recipe, target, first)
    # a serial state update may be grown on a trained DSpark: it starts as a no-op, the rest loads
    stateful = TrainConfig.from_flat(**{**cfg.flat(), "markov_state": 8}).options
    grown = recipe.build(target, stateful, LAYERS, cache)
    warm_start(grown, recipe, target, first)
    for k, v in trained.items():
        torch.testing.assert_close(grown.state_dict()[k], v)
    assert not grown.state_out.weight.any() and grown.cfg.markov_state == 8
    states = torch.randn(3, grown.cfg.hidden_size)
    torch.testing.assert_close(grown.step_states(states, torch.tensor([3, 4, 5])), states)
    recipe.save(grown, tmp_path / "grown", None)  # and the reverse would drop trained weights: refused
    with pytest.raises(DraftsmithError, match="another drafter.*state_in"):
        warm_start(recipe.build(target, opts, LAYERS, cache), recipe, target, str(tmp_path / "grown"))
    # a deeper drafter (--layers 2) may start from it too; a shallower one would drop a layer: refused
    deep_cfg = TrainConfig.from_flat(**{**cfg.flat(), "num_layers": 2})
    deep = recipe.build(target, deep_cfg.options, LAYERS, cache)
    added = warm_start(deep, recipe, target, first)
    assert added and all(k.startswith("layers.1.") for k in added) and not deep.layers[1].o.weight.any()
    for k, v in trained.items():
        torch.testing.assert_close(deep.state_dict()[k], v)
    recipe.save(deep, tmp_path / "deep", None)
    with pytest.raises(DraftsmithError, match="another drafter.*layers.1"):
        warm_start(recipe.build(target, opts, LAYERS, cache), recipe, target, str(tmp_path / "deep"))
    flash = _tiny_block_config("dflash", steps=3)
    with pytest.raises(DraftsmithError, match="DSpark drafter; use --method dspark"):
        warm_start(flash.recipe.build(target, flash.options, LAYERS, cache), flash.recipe, target, first)
    with pytest.raises(DraftsmithError, match="not found"):
        warm_start(fresh, recipe, target, str(tmp_path / "nowhere"))


@pytest.mark.parametrize("method", ["dflash", "dspark"])
def test_a_fine_tune_turns_a_draftsmith_only_drafter_into_an_exportable_one(tmp_path, method):
    """The default recipe is what the public formats carry (q/k norms, no lookup input); a drafter
    trained with lookup guesses and without norms continues into it: the norms start at weight 1,
    the lookup weights are left behind, every other weight loads, and the result exports."""
    from draftsmith.export import export_drafter, verifier_of
    from draftsmith.training.train import warm_start

    target, cache = tiny_cache(tmp_path, n=6)
    cfg = _tiny_block_config(method, steps=2)
    # lookup guesses feed slots that draft from the anchor: a DFlash then has DSpark's layout, and
    # the fine-tune below also relays it into the default (z-lab's)
    anchor = {"mask_slots": False} if method == "dflash" else {}
    old = TrainConfig.from_flat(**{**cfg.flat(), "qk_norm": False, "lookup_input": 4, **anchor})
    train(target, cache, old, tmp_path / "old", progress=False)
    recipe = cfg.recipe
    trained = recipe.load(target, tmp_path / "old", dtype=torch.float32)
    with pytest.raises(DraftsmithError, match="lookup_input"):
        export_drafter(trained, "speculators", tmp_path / "refused", verifier_of(target))
    assert cfg.options.qk_norm and not cfg.options.lookup_input  # the defaults
    fresh = recipe.build(target, cfg.options, LAYERS, cache)
    grown = warm_start(fresh, recipe, target, str(tmp_path / "old"))
    assert grown == {"layers.0.q_norm.weight", "layers.0.k_norm.weight"}
    assert all(bool((w == 1).all()) for k, w in fresh.state_dict().items() if k in grown)
    kept = {k: v for k, v in trained.state_dict().items() if not k.startswith(("lookup_in", "lookup_len"))}
    for k, v in kept.items():
        torch.testing.assert_close(fresh.state_dict()[k], v)
    assert not hasattr(fresh, "lookup_in") and fresh.cfg.qk_norm
    run = TrainConfig.from_flat(**{**cfg.flat(), "init_from": str(tmp_path / "old")})
    train(target, cache, run, tmp_path / "new", progress=False)
    new = recipe.load(target, tmp_path / "new", dtype=torch.float32)
    assert (
        new.cfg.qk_norm and new.cfg.lookup_input == 0 and new.cfg.sample_from_anchor == (method == "dspark")
    )
    export_drafter(new, "speculators", tmp_path / "exported", verifier_of(target))
    # turning an input on, or norms off, still has to match a trained drafter's own weights
    with pytest.raises(DraftsmithError, match="another drafter.*qk_norm"):
        no_norm = TrainConfig.from_flat(**{**cfg.flat(), "qk_norm": False}).options
        warm_start(recipe.build(target, no_norm, LAYERS, cache), recipe, target, str(tmp_path / "new"))


def test_a_fine_tune_grows_lookup_guesses_at_their_own_rate_and_resumes(tmp_path):
    """--lookup-input on a trained DSpark: the new weights start at zero and learn at lr x grown_lr
    (Adam's first steps move every weight by ~lr, so the largest grown entry shows the rate)."""
    target = tiny_target()
    answers = make_answers(tmp_path, n=6)
    rows = [json.loads(line) for line in answers.read_text().splitlines()]
    for r in rows:  # answers that repeat themselves, so most anchors have a lookup guess
        r["answer"] = " ".join([r["answer"].split()[0], "t7 t8 t9"] * 5)
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_cache(target, answers, tmp_path / "cache", LAYERS, progress=False)
    cache = TargetCache(tmp_path / "cache", target)
    cfg = _tiny_block_config("dspark", steps=2)
    train(target, cache, cfg, tmp_path / "first", progress=False)
    moved = {}
    for scale in (1.0, 10.0):
        flat = {**cfg.flat(), "init_from": str(tmp_path / "first"), "lookup_input": 4, "grown_lr": scale}
        flat.update(steps=2, warmup=0.0, lr=1e-3)
        run = TrainConfig.from_flat(**flat)
        if scale > 1:  # stop and resume: the resume rebuilds the same two parameter groups
            train(target, cache, run, tmp_path / f"grown{scale}", progress=False, stop_after=1)
        train(target, cache, run, tmp_path / f"grown{scale}", progress=False)
        model = cfg.recipe.load(target, tmp_path / f"grown{scale}", dtype=torch.float32)
        assert model.cfg.lookup_input == 4
        moved[scale] = float(model.lookup_in.weight.abs().max())
    assert 0 < moved[1.0] <= 2.5e-3 and 5 * moved[1.0] < moved[10.0] <= 2.5e-2
    with pytest.raises(DraftsmithError, match="grown_lr"):
        TrainConfig.from_flat(**{**flat, "grown_lr": 0.0})
    # continuing that fine-tune: loaded weights learn at the base rate unless --regrow names them
    grown = str(tmp_path / "grown10.0")
    before = cfg.recipe.load(target, grown, dtype=torch.float32).lookup_in.weight
    step = {}
    for regrow in ((), ("lookup_in", "lookup_len")):
        run = TrainConfig.from_flat(**{**flat, "init_from": grown, "regrow": regrow})
        train(target, cache, run, tmp_path / f"regrow{len(regrow)}", progress=False)
        after = cfg.recipe.load(target, tmp_path / f"regrow{len(regrow)}", dtype=torch.float32)
        step[len(regrow)] = float((after.lookup_in.weight - before).abs().max())
    assert 0 < step[0] <= 2.5e-3 and 5 * step[0] < step[2] <= 2.5e-2
    with pytest.raises(DraftsmithError, match="no weight"):
        bad = TrainConfig.from_flat(**{**flat, "init_from": grown, "regrow": ("lookup_x",)})
        train(target, cache, bad, tmp_path / "bad", progress=False)
    with pytest.raises(DraftsmithError, match="init-from"):
        TrainConfig.from_flat(**{**flat, "init_from": None, "regrow": ("lookup_in",)})


def test_online_data_matches_the_cache(tmp_path):
    from draftsmith.training.cache import OnlineData

    target = tiny_target()
    answers = make_answers(tmp_path, n=3)
    build_cache(target, answers, tmp_path / "cache", LAYERS, dtype="float32", progress=False)
    cache, online = TargetCache(tmp_path / "cache", target), OnlineData(target, answers, LAYERS)
    assert len(cache) == len(online) == 3
    for i in range(3):
        a, b = cache[i], online[i]
        assert a.ids.tolist() == b.ids.tolist()
        torch.testing.assert_close(a.features, b.features)
        torch.testing.assert_close(a.final, b.final)
    assert (cache.token_counts(VOCAB) == online.token_counts(VOCAB)).all()


def test_rows_without_an_answer_inside_max_len_are_not_cached(tmp_path):
    """A prompt as long as --max-len leaves nothing to learn: it costs a full pass, so it is dropped."""
    from draftsmith.training.cache import OnlineData

    target = tiny_target()
    answers = make_answers(tmp_path, n=4)
    rows = list(read_rows(answers))
    rows[1]["prompt"] = " ".join(["t5"] * 40)  # ~40+ prompt tokens against a 24-token window
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert not any(tokenize_row(target, rows[1], 24)[1]) and any(tokenize_row(target, rows[0], 24)[1])
    manifest = build_cache(target, answers, tmp_path / "cache", LAYERS, max_len=24, progress=False)
    assert manifest["sequences"] == 3 and manifest["dropped_no_answer"] == 1
    cache = TargetCache(tmp_path / "cache", target)
    assert all(s.loss_mask.any() for s in cache)
    assert cache[1].ids.tolist() == tokenize_row(target, rows[2], 24)[0]  # the row after the dropped one
    assert len(OnlineData(target, answers, LAYERS, max_len=24)) == 3
    limited = build_cache(target, answers, tmp_path / "c2", LAYERS, max_len=24, limit=2, progress=False)
    assert limited["sequences"] == 1  # --limit counts answer rows, before the drop
    every = build_cache(target, answers, tmp_path / "c4", LAYERS, max_len=24, keep_all=True, progress=False)
    assert every["sequences"] == 4 and every["rows"] == "all" and manifest["rows"] == "with-answer"
    with pytest.raises(DraftsmithError, match="other settings.*rows"):  # one cache, one rule
        build_cache(target, answers, tmp_path / "c4", LAYERS, max_len=24, progress=False)
    with pytest.raises(DraftsmithError, match="2 prompts are 4 tokens or longer"):
        build_cache(target, answers, tmp_path / "c3", LAYERS, max_len=4, limit=2, progress=False)


def test_training_runs_under_torchrun_with_two_processes(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    target = tiny_target()
    build_cache(target, make_answers(tmp_path, n=6), tmp_path / "cache", LAYERS, progress=False)
    worker = Path(__file__).parent / "ddp_worker.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        "29533",
        str(worker),
        str(tmp_path / "cache"),
        str(tmp_path / "out"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    state = torch.load(tmp_path / "out" / "trainer_state.pt", weights_only=False)
    assert state["step"] == 2 and (tmp_path / "out" / "model.safetensors").is_file()


def test_training_against_a_bf16_target_online_and_cached(tmp_path):
    """A bf16 target (the default on GPUs and bf16-capable CPUs) still trains an fp32 drafter."""
    from draftsmith.models.target import Target
    from draftsmith.training.cache import OnlineData

    fp32 = tiny_target()
    answers = make_answers(tmp_path, n=4)
    build_cache(fp32, answers, tmp_path / "cache", LAYERS, progress=False)
    bf16 = Target(fp32.model.to(torch.bfloat16), fp32.tokenizer, name=fp32.name)
    cfg = TrainConfig.from_flat(
        method="dspark", steps=2, batch=2, anchors=4, block_size=3, draft_vocab=None, held_out=1
    )
    for data, out in (
        (TargetCache(tmp_path / "cache", bf16), "cached"),
        (OnlineData(bf16, answers, LAYERS), "online"),
    ):
        res = train(bf16, data, cfg, tmp_path / out, progress=False)
        assert res["steps"] == 2 and math.isfinite(res["last"]["loss"])


def test_cache_uses_the_targets_own_ids_and_no_eos_after_a_truncated_answer(tmp_path):
    target = tiny_target()
    prompt = "t5 t6 t7"
    p_ids = target.encode(prompt)
    eos = min(target.eos_ids)
    rows = [
        # the ids the target wrote differ from what the text re-encodes to: the ids win
        {"id": "a", "prompt": prompt, "answer": "t9 t9", "answer_ids": [11, 12, 13], "finish_reason": "eos"},
        # cut at the token budget: the target never chose to stop, so no EOS label
        {"id": "b", "prompt": prompt, "answer": "t9", "answer_ids": [14, 15], "finish_reason": "length"},
        # human-written answer without ids: re-encoded text, complete, so it ends with EOS
        {"id": "c", "prompt": prompt, "answer": "t9 t8"},
    ]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_cache(target, answers, tmp_path / "cache", LAYERS, progress=False)
    cache = TargetCache(tmp_path / "cache", target)
    assert cache[0].ids.tolist() == p_ids + [11, 12, 13, eos]
    assert cache[1].ids.tolist() == p_ids + [14, 15]  # no EOS
    assert cache[1].loss_mask.tolist() == [False] * len(p_ids) + [True, True]
    assert cache[2].ids.tolist() == p_ids + target.tokenizer.encode("t9 t8", add_special_tokens=False) + [eos]
    # the cache also holds the target's own argmax at every position
    ref = target_sequence(target, cache[0].ids.tolist(), cache[0].loss_mask.tolist(), LAYERS)
    assert cache[0].greedy.tolist() == ref.greedy.tolist()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**rows[0], "answer_ids": [10**9]}) + "\n")
    with pytest.raises(DraftsmithError, match="not token ids of this target"):
        build_cache(target, bad, tmp_path / "cache-bad", LAYERS, progress=False)


def test_regenerated_rows_carry_the_target_ids_that_the_cache_trains_on(tmp_path):
    target = tiny_target()
    prompts = tmp_path / "prompts.jsonl"
    write_prompts(prompts, n=3)
    out = tmp_path / "answers.jsonl"
    regenerate(prompts, out, local_engine(target, RegenConfig(max_new_tokens=6, batch=2)), progress=False)
    build_cache(target, out, tmp_path / "cache", LAYERS, progress=False)
    cache = TargetCache(tmp_path / "cache", target)
    by_id = {r["id"]: r for r in read_rows(out)}
    for i, row in enumerate(r for r in read_rows(out) if r["answer"]):
        row = by_id[row["id"]]
        expect = target.encode(row["prompt"]) + row["answer_ids"]
        if row["finish_reason"] == "eos":
            expect.append(min(target.eos_ids))
        assert cache[i].ids.tolist() == expect
        assert row["new_tokens"] == len(row["answer_ids"])


def test_default_init_is_random_and_wsd_schedule_is_flat_then_decays(tmp_path):
    from draftsmith.training.train import lr_lambda

    assert TrainConfig().options.init == "random"
    f = lr_lambda(TrainConfig(steps=100, warmup=0.1, schedule="wsd", decay=0.2))
    assert f(0) == pytest.approx(0.1) and f(10) == 1.0 and f(79) == 1.0
    assert f(90) == pytest.approx(0.5) and f(100) == 0.0
    with pytest.raises(DraftsmithError, match="schedule"):
        TrainConfig(schedule="linear")
    with pytest.raises(DraftsmithError, match="label"):
        TrainConfig.from_flat(label="argmax")
    with pytest.raises(DraftsmithError, match="ce_weight"):
        TrainConfig.from_flat(ce_weight=1.5)
    with pytest.raises(DraftsmithError, match="feature_weight"):
        TrainConfig.from_flat(feature_weight=-1.0)
    soft = TrainConfig.from_flat(label="soft")
    assert soft.options.label == "soft" and TrainConfig().options.ce_weight == 0.5


def test_the_trainer_is_generic_over_registered_recipes():
    """Methods are trained through the recipe their drafter class names; options belong to the method
    and the CLI derives its flags from them, so a mistyped or foreign option is an error."""
    import argparse

    from draftsmith.cli.options import add_option_flags, options_from_args, training_options
    from draftsmith.drafters.registry import METHODS, recipe_for, trainable_methods

    assert {"dflash", "dspark"} <= set(trainable_methods())
    assert recipe_for("dspark") is METHODS["dspark"].recipe
    with pytest.raises(DraftsmithError, match="not trained"):
        recipe_for("ngram")
    with pytest.raises(DraftsmithError, match="no option"):
        TrainConfig.from_flat(method="dflash", blok_size=4)
    cfg = TrainConfig.from_flat(method="dflash", block_size=4, steps=3)
    assert cfg.flat()["block_size"] == 4 and cfg.flat()["steps"] == 3
    assert TrainConfig.from_flat(**cfg.flat()).flat() == cfg.flat()
    parser = argparse.ArgumentParser()
    add_option_flags(parser, training_options())
    args = parser.parse_args(["--block-size", "5", "--layers", "2", "--anchor-context"])
    opts = options_from_args(recipe_for("dspark"), args)
    assert (opts.block_size, opts.num_layers, opts.anchor_context, opts.markov_rank) == (5, 2, True, 64)


def test_gzipped_answers_read_like_plain_ones(tmp_path):
    import gzip

    rows = [{"id": "a", "prompt": "t5", "answer": "t6", "answer_ids": [6]}]
    path = tmp_path / "answers.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    assert list(read_rows(path)) == rows


def test_heap_only_allocation_takes_effect_on_glibc():
    import platform

    from draftsmith.engine.allocator import keep_freed_memory

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    assert keep_freed_memory() is True
    assert keep_freed_memory() is True  # idempotent


def test_bounded_allocation_takes_effect_on_glibc():
    import platform

    from draftsmith.engine.allocator import bound_freed_memory

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    assert bound_freed_memory() is True


def test_a_drafter_trained_with_qk_norm_exports_to_speculators(tmp_path):
    """--qk-norm makes a trained drafter carry what the vLLM/SGLang formats need; it round-trips."""
    from draftsmith.drafters.dflash.checkpoint import load_drafter
    from draftsmith.export import export_drafter, verifier_of

    target = tiny_target()
    build_cache(target, make_answers(tmp_path, n=4), tmp_path / "cache", LAYERS, progress=False)
    cfg = TrainConfig.from_flat(
        method="dspark",
        steps=2,
        batch=2,
        anchors=4,
        block_size=4,
        markov_rank=8,
        draft_vocab=None,
        qk_norm=True,
    )
    train(target, TargetCache(tmp_path / "cache", target), cfg, tmp_path / "run", progress=False)
    model = load_drafter(tmp_path / "run", target)
    assert model.cfg.qk_norm
    export_drafter(model, "speculators", tmp_path / "exported", verifier_of(target))
    back = load_drafter(tmp_path / "exported", target)
    theirs = back.state_dict()
    for k, v in model.state_dict().items():
        if k == "markov_in.weight":  # ours adds a row for tokens outside the draft vocabulary (none here)
            v = v[: theirs[k].shape[0]]
        torch.testing.assert_close(theirs[k].to(v.dtype), v)


@pytest.mark.slow  # torch.compile builds C++ kernels
@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="no C++ compiler")
def test_a_compiled_loss_trains_like_the_eager_one(tmp_path):
    target = tiny_target()
    answers = make_answers(tmp_path, n=6)
    build_cache(target, answers, tmp_path / "cache", LAYERS, progress=False)
    cache = TargetCache(tmp_path / "cache", target)
    cfg = _tiny_block_config("dspark", steps=3)
    logs = {}
    for arm in ("eager", "compiled"):
        train(target, cache, cfg, tmp_path / arm, progress=False, compile_loss=arm == "compiled")
        logs[arm] = [json.loads(x) for x in (tmp_path / arm / "train_log.jsonl").read_text().splitlines()]
    eager, compiled = logs["eager"], logs["compiled"]
    assert compiled[0]["loss"] == pytest.approx(eager[0]["loss"], rel=1e-4)  # the same weights at step 1
    for e, c in zip(eager, compiled, strict=True):
        for key in ("loss", "ce", "l1", "bce"):
            assert c[key] == pytest.approx(e[key], rel=1e-2), (e["step"], key)
    assert compiled[-1]["held_out_tau_greedy"] == pytest.approx(eager[-1]["held_out_tau_greedy"], abs=0.05)


def test_a_dflash_in_zlab_layout_trains_exports_to_zlab_and_decodes_losslessly(tmp_path):
    """--mask-slots: slot 0 carries the anchor and drafts nothing, slots 1.. draft the tokens at their
    own positions (z-lab's layout, which SGLang and vLLM's DFlash runner load)."""
    from draftsmith.drafters.dflash.checkpoint import load_drafter
    from draftsmith.drafters.dflash.training import build_blocks
    from draftsmith.drafters.registry import build_drafter
    from draftsmith.engine.decode import speculative_generate
    from draftsmith.engine.stop import StopRule
    from draftsmith.export import export_drafter, verifier_of

    ids = torch.arange(10, 20)[None]
    mask = torch.ones_like(ids, dtype=torch.bool)
    blocks = build_blocks(ids, mask, [torch.tensor([2])], 4, 99, first_slot=1)
    assert blocks.block_ids[0].tolist() == [12, 99, 99, 99]  # the anchor, then mask tokens
    assert blocks.labels[0].tolist() == [-100, 13, 14, 15]  # slot k predicts the token at a + k
    assert blocks.target_pos[0].tolist()[1:] == [2, 3, 4]  # where the target's own distribution lives
    anchor = build_blocks(ids, mask, [torch.tensor([2])], 4, 99)
    assert anchor.labels[0].tolist() == [13, 14, 15, 16]  # the default: the anchor slot drafts too

    target, cache = tiny_cache(tmp_path, n=8)
    flat = dict(steps=6, batch=2, anchors=4, block_size=4, draft_vocab=0, eval_every=3, save_every=3)
    cfg = TrainConfig.from_flat(method="dflash", mask_slots=True, held_out=2, lr=3e-3, **flat)
    train(target, cache, cfg, tmp_path / "zl", progress=False)
    log = [json.loads(x) for x in (tmp_path / "zl" / "train_log.jsonl").read_text().splitlines()]
    assert all(1.0 <= log[2][k] <= 4.0 for k in ("held_out_tau", "held_out_tau_greedy"))
    model = load_drafter(tmp_path / "zl", target)
    assert not model.cfg.sample_from_anchor
    export_drafter(model, "zlab", tmp_path / "z", verifier_of(target))  # refused before: "anchor slot"
    again = load_drafter(tmp_path / "z", target)
    assert not again.cfg.sample_from_anchor
    torch.testing.assert_close(again.fc.weight, model.fc.weight)
    prompt = [5, 9, 14, 3, 22, 9, 14, 30, 41]
    outs = []
    for source in (tmp_path / "zl", tmp_path / "z"):
        drafter = build_drafter("dflash", target, drafter=str(source))
        assert drafter.default_k == 3  # block 4: three drafts
        outs.append(speculative_generate(target.runner, drafter, prompt, StopRule(30), adaptive=False).tokens)
    plain = speculative_generate(target.runner, build_drafter("plain", target), prompt, StopRule(30)).tokens
    assert outs == [plain, plain]
    with pytest.raises(DraftsmithError, match="mask-slots"):
        train(target, cache, TrainConfig.from_flat(method="dspark", mask_slots=True, **flat), tmp_path / "x")


@pytest.mark.parametrize(
    "method,formats", [("dflash", ["speculators", "zlab"]), ("dspark", ["speculators", "deepspec"])]
)
def test_the_default_recipe_exports_to_every_format_of_its_method(tmp_path, method, formats):
    """`train --method dflash|dspark` with no recipe option: q/k norms, no lookup input, the whole
    vocabulary, DFlash in z-lab's mask-slot layout, DSpark from the anchor slot. Every format of the
    method takes it, and the import decodes as the drafter did (GGUF goes through these exports)."""
    from test_export import TINY_PROMPTS, drafts

    from draftsmith.drafters.dflash.checkpoint import load_drafter
    from draftsmith.export import export_drafter, verifier_of
    from draftsmith.export.gguf import spec_type

    target, cache = tiny_cache(tmp_path, n=6)
    cfg = TrainConfig.from_flat(method=method, steps=2, batch=2, held_out=2)  # budget only
    train(target, cache, cfg, tmp_path / "run", progress=False)
    model = load_drafter(tmp_path / "run", target)
    assert model.cfg.qk_norm and not model.cfg.lookup_input and model.cfg.draft_vocab_size is None
    assert model.cfg.sample_from_anchor == (method == "dspark")
    want = drafts(target, model, TINY_PROMPTS)  # every round's draft, decoding losslessly
    for fmt in formats:
        export_drafter(model, fmt, tmp_path / fmt, verifier_of(target))
        assert drafts(target, load_drafter(tmp_path / fmt, target), TINY_PROMPTS) == want, fmt
    assert spec_type(method, tmp_path / "run") == {"dflash": "draft-dflash", "dspark": "draft-dspark"}[method]


def test_a_fine_tune_relays_a_dflash_into_zlab_layout_and_keeps_its_body(tmp_path):
    """--init-from with --mask-slots --draft-vocab 0: the layout and the draft vocabulary (rows of the
    target's own head) change, every trained weight carries over; a fine-tune that keeps the draft
    vocabulary's size keeps the loaded vocabulary too."""
    from draftsmith.training.train import warm_start

    target, cache = tiny_cache(tmp_path, n=6)
    first = TrainConfig.from_flat(**{**_tiny_block_config("dflash", steps=3).flat(), "mask_slots": False})
    train(target, cache, first, tmp_path / "anchor", progress=False)
    loaded = first.recipe.load(target, tmp_path / "anchor", dtype=torch.float32)
    flat = {**first.flat(), "mask_slots": True, "draft_vocab": 0}
    relaid = TrainConfig.from_flat(**flat)
    model = relaid.recipe.build(target, relaid.options, LAYERS, cache)
    warm_start(model, relaid.recipe, target, str(tmp_path / "anchor"))
    assert not model.cfg.sample_from_anchor and model.d2t.shape[0] == target.runner.vocab_size
    for name, weight in loaded.state_dict().items():
        if name != "d2t":
            torch.testing.assert_close(model.state_dict()[name], weight, msg=name)
    same = first.recipe.build(target, first.options, LAYERS, cache)
    same.d2t = same.d2t.flip(0)  # another vocabulary of the same size: the loaded one wins
    warm_start(same, first.recipe, target, str(tmp_path / "anchor"))
    assert torch.equal(same.d2t, loaded.d2t)
