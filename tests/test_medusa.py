"""Medusa on tiny models: lossless decoding (single and batched), drafts equal the training path,
training through the generic trainer (resume, save, load), and clear errors. Medusa was added as
one package plus one registry line; these tests use nothing else of it."""

from __future__ import annotations

import json
import math

import pytest
import torch
from conftest import VOCAB, tiny_target
from safetensors.torch import load_file, save_file

from draftsmith.drafters.medusa.checkpoint import load_medusa, save_medusa
from draftsmith.drafters.medusa.drafter import MedusaDrafter
from draftsmith.drafters.medusa.recipe import MedusaOptions, MedusaRecipe, head_loss, layout
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.sampling import SamplingParams
from draftsmith.errors import DraftsmithError
from draftsmith.training.cache import TargetCache, build_cache, target_sequence
from draftsmith.training.train import TrainConfig, train

PROMPT = [5, 9, 14, 3, 22, 9, 14, 30, 41]


class Counts:
    """Stands in for a target cache's token counts (a reduced draft vocabulary keeps the most frequent)."""

    def token_counts(self, vocab: int):
        return torch.randperm(vocab, generator=torch.Generator().manual_seed(0)).numpy()


def make_medusa(target, seed: int = 0, **opts):
    torch.manual_seed(seed)
    model = MedusaRecipe().build(target, MedusaOptions(**opts), [1], Counts())
    for p in model.parameters():  # off the zero init, so the heads disagree with the target
        torch.nn.init.normal_(p, std=0.05)
    return model.eval()


def plain(target, ids, n=40):
    return speculative_generate(target.runner, PlainDrafter(), ids, StopRule(n)).tokens


def fitted_medusa(target, steps: int = 80):
    """Heads overfitted to the target's greedy continuation of PROMPT: their drafts get accepted."""
    ids = PROMPT + plain(target, PROMPT, 40)
    batch = layout([target_sequence(target, ids, [True] * len(ids), [1])], 0, target.device, None)
    model = MedusaRecipe().build(target, MedusaOptions(heads=3), [1], None).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss, _ = head_loss(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_medusa_decodes_losslessly_greedy_and_sampled(arch):
    target = tiny_target(arch)
    for model in (make_medusa(target), fitted_medusa(target)):
        drafter = MedusaDrafter.build(target, TrainedDecodeOptions(drafter=model))
        res = speculative_generate(target.runner, drafter, PROMPT, StopRule(40), adaptive=False)
        assert res.tokens == plain(target, PROMPT) and res.stats.drafted > 0
    assert res.stats.accepted >= res.stats.drafted // 2 > 0  # the fitted heads' drafts are kept
    params = SamplingParams(temperature=0.9, top_p=0.95, seed=3)
    a = speculative_generate(target.runner, drafter, PROMPT, StopRule(30), params, adaptive=False)
    b = speculative_generate(target.runner, drafter, PROMPT, StopRule(30), params, adaptive=False)
    assert a.tokens == b.tokens and len(a.tokens) == 30 and all(0 <= t < VOCAB for t in a.tokens)
    one = speculative_generate(target.runner, drafter, [7], StopRule(12), adaptive=False)
    assert one.tokens == plain(target, [7], 12)  # a one-token prompt has no target state yet


def test_batched_requests_decode_as_plain_alone():
    target = tiny_target()
    drafter = MedusaDrafter.build(target, TrainedDecodeOptions(drafter=fitted_medusa(target)))
    prompts = [PROMPT, PROMPT[:5] + [60, 61], [7, 8, 9], PROMPT[2:]]
    stop = StopRule(24)
    for schedule in ("fixed", "history"):
        decoder = BatchDecoder(target.runner, 3, 64, schedule)  # 4 requests through 3 slots
        out = batch_generate(decoder, prompts, [drafter.fork() for _ in prompts], stop)
        assert [tokens for tokens, _, _ in out] == [plain(target, p, 24) for p in prompts]
    assert sum(stats.accepted for _, _, stats in out) > 0


def test_inference_drafts_equal_the_training_path():
    """Each round's drafts are the heads' argmax at the state before the last committed token, which
    is what training and held-out evaluation score at that row."""
    target = tiny_target()
    model = make_medusa(target, seed=1)
    rounds = []

    class Recording(MedusaDrafter):
        def propose(self, tokens, k, params, generator):
            draft = super().propose(tokens, k, params, generator)
            rounds.append((tokens.tolist(), draft.tokens.tolist()))
            return draft

    speculative_generate(
        target.runner, Recording.build(target, TrainedDecodeOptions(drafter=model)), PROMPT, StopRule(20)
    )
    assert len(rounds) > 3
    for tokens, drafts in rounds[:4]:
        seq = target_sequence(target, tokens, [True] * len(tokens), [1])
        with torch.no_grad():
            heads = model(seq.final[len(tokens) - 2]).argmax(-1)
        assert model.d2t[heads][: len(drafts)].tolist() == drafts


def test_training_steps_lower_the_loss_for_every_label():
    target = tiny_target()
    g = torch.Generator().manual_seed(0)
    seqs = [
        target_sequence(target, ids, [False] * 3 + [True] * 17, [1])
        for ids in torch.randint(3, VOCAB, (2, 20), generator=g).tolist()
    ]
    batch = layout(seqs, 0, target.device, None)
    for label in ("token", "greedy", "soft"):
        model = make_medusa(target).train()
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        losses = []
        for _ in range(10):
            loss, metrics = head_loss(model, batch, label)
            losses.append(float(loss.detach()))
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert losses[-1] < losses[0] and {"ce1", "ce4", "acc1", "tau_est"} <= set(metrics)
    g = torch.Generator().manual_seed(1)
    picked = layout(seqs, 5, target.device, g)  # 5 rows per sequence, each an answer token's predecessor
    assert picked.rows.shape == (2, 5) and all(seqs[0].loss_mask[r + 1] for r in picked.rows[0].tolist())
    assert math.isfinite(head_loss(make_medusa(target), picked)[0].item())


def make_answers(tmp_path, n=8):
    g = torch.Generator().manual_seed(1)
    rows = []
    for i in range(n):
        p, a = torch.randint(3, VOCAB, (6,), generator=g), torch.randint(3, VOCAB, (20,), generator=g)
        prompt, answer = (" ".join(f"t{t}" for t in x.tolist()) for x in (p, a))
        rows.append({"id": f"p{i}", "prompt": prompt, "answer": answer})
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_trained_heads_score_save_and_decode(tmp_path):
    """(Exact resume: test_training_pipeline.py, for every trainable method.)"""
    target = tiny_target()
    build_cache(target, make_answers(tmp_path), tmp_path / "cache", [1, 2], progress=False)
    cache = TargetCache(tmp_path / "cache", target)
    cfg = TrainConfig.from_flat(
        method="medusa", steps=6, batch=2, heads=3, draft_vocab=48, eval_every=3, save_every=3, held_out=2
    )
    train(target, cache, cfg, tmp_path / "straight", progress=False)
    log = [json.loads(x) for x in (tmp_path / "straight" / "train_log.jsonl").read_text().splitlines()]
    assert all(math.isfinite(r["loss"]) for r in log)  # that steps lower it: the test above
    for key in ("tau", "tau_k3", "tau_greedy", "tau_greedy_k3"):
        assert 1.0 <= log[2][f"held_out_{key}"] <= 4.0
    model = load_medusa(tmp_path / "straight", target)
    assert model.d2t.shape[0] == 48 and model.cfg.num_heads == 3
    drafter = build_drafter("medusa", target, drafter=str(tmp_path / "straight"))
    res = speculative_generate(target.runner, drafter, PROMPT, StopRule(30), adaptive=False)
    assert res.tokens == plain(target, PROMPT, 30)
    seqs = list(cache)[:3]
    first = MedusaRecipe().evaluate(model.float(), seqs, MedusaOptions())
    assert first == MedusaRecipe().evaluate(model, seqs, MedusaOptions())
    assert all(math.isfinite(v) and v >= 1.0 for v in first.values())


def test_bad_checkpoints_and_options_are_clear_errors(tmp_path):
    target = tiny_target()
    save_medusa(make_medusa(target), tmp_path / "d")
    with pytest.raises(DraftsmithError, match="was trained for target"):
        load_medusa(tmp_path / "d", tiny_target("qwen3", seed=3))
    with pytest.raises(DraftsmithError, match="not found"):
        MedusaDrafter.build(target, TrainedDecodeOptions(drafter=str(tmp_path / "missing")))
    with pytest.raises(DraftsmithError, match="needs --drafter"):
        MedusaDrafter.build(target)
    with pytest.raises(DraftsmithError, match="k must be >= 0"):
        MedusaDrafter.build(target, TrainedDecodeOptions(drafter=str(tmp_path / "d")), k=-1)
    state = load_file(str(tmp_path / "d" / "model.safetensors"))
    del state["heads.0.0.linear.weight"]
    save_file(state, str(tmp_path / "d" / "model.safetensors"))
    with pytest.raises(DraftsmithError, match="does not match"):
        load_medusa(tmp_path / "d", target)
    for bad in (dict(heads=0), dict(step_decay=0.0), dict(label="x"), dict(num_layers=0)):
        with pytest.raises(DraftsmithError):
            MedusaOptions(**bad)


def test_medusa_export_has_vllms_names_and_loads_back_with_the_same_drafts(tmp_path, capsys):
    """The names, shapes and config keys vLLM's medusa model reads (model_executor/models/medusa.py),
    written by the CLI, and the directory decodes again with identical drafts."""
    from unittest.mock import patch

    from draftsmith.cli import main
    from draftsmith.export.methods import method_of

    target = tiny_target()
    save_medusa(fitted_medusa(target), tmp_path / "d", dtype=torch.float16)
    save_medusa(make_medusa(target, draft_vocab=48), tmp_path / "small")
    assert method_of(tmp_path / "d") == "medusa"
    with patch("draftsmith.cli.common.load_target", return_value=target):
        for src in ("d", "small"):
            argv = [
                "export",
                "--format",
                "medusa",
                "--drafter",
                str(tmp_path / src),
                "--out",
                str(tmp_path / f"v{src}"),
            ]
            assert main(argv) == 0, capsys.readouterr().err
        assert (
            main(
                ["export", "--format", "zlab", "--drafter", str(tmp_path / "d"), "--out", str(tmp_path / "z")]
            )
            == 2
        )
        assert "its formats: medusa" in capsys.readouterr().err
        argv = ["export", "--format", "vllm", "--drafter", str(tmp_path / "d"), "--out", str(tmp_path / "x")]
        assert main(argv) == 2
        assert "vLLM 0.33 has no Medusa" in capsys.readouterr().err
    cfg = json.loads((tmp_path / "vsmall" / "config.json").read_text())
    assert cfg["model_type"] == "medusa" and cfg["architectures"] == ["MedusaModel"]
    assert (cfg["vocab_size"], cfg["truncated_vocab_size"], cfg["num_heads"], cfg["num_hidden_layers"]) == (
        VOCAB,
        48,
        4,
        1,
    )
    assert cfg["original_lm_head"] is True and cfg["medusa_fc_bias"] is True
    weights = load_file(str(tmp_path / "vsmall" / "model.safetensors"))
    h = target.model.config.hidden_size
    assert weights["blocks.3.layers.0.weight"].shape == (h, h) and weights[
        "blocks.0.layers.0.bias"
    ].shape == (h,)
    assert weights["lm_heads.0.weight"].shape == (48, h) and weights["token_map"].shape == (48,)
    assert "token_map" not in load_file(str(tmp_path / "vd" / "model.safetensors"))  # the whole vocabulary
    assert method_of(tmp_path / "vd") == "medusa"
    for a, b in (("d", "vd"), ("small", "vsmall")):
        ours, back = load_medusa(tmp_path / a, target), load_medusa(tmp_path / b, target)
        for k, v in ours.state_dict().items():
            torch.testing.assert_close(back.state_dict()[k], v)
        runs = [
            speculative_generate(
                target.runner,
                MedusaDrafter.build(target, TrainedDecodeOptions(drafter=str(tmp_path / d))),
                PROMPT,
                StopRule(30),
            )
            for d in (a, b)
        ]
        assert runs[0].tokens == runs[1].tokens == plain(target, PROMPT, 30)
        assert runs[0].stats.accepted == runs[1].stats.accepted


def test_foreign_medusa_directories_are_refused_by_name(tmp_path):
    """What vLLM would compute differently from draftsmith: another head, biases it would drop, a
    broken token map, weights the config does not describe."""
    from draftsmith.drafters.medusa.export import write_medusa
    from draftsmith.export.common import verifier_of

    target = tiny_target()
    save_medusa(make_medusa(target, draft_vocab=48), tmp_path / "d")
    write_medusa(load_medusa(tmp_path / "d", target), tmp_path / "v", verifier_of(target))
    cfg = json.loads((tmp_path / "v" / "config.json").read_text())
    good = load_file(str(tmp_path / "v" / "model.safetensors"))

    def refused(match: str, config: dict | None = None, **changes) -> None:
        weights = {k: v for k, v in (good | changes).items() if v is not None}
        save_file(weights, str(tmp_path / "v" / "model.safetensors"))
        (tmp_path / "v" / "config.json").write_text(json.dumps(cfg | (config or {})))
        with pytest.raises(DraftsmithError, match=match):
            load_medusa(tmp_path / "v", target)

    # an export made where the target ran in bf16 carries the head's bf16 rounding: still the target's
    rounded = good["lm_heads.0.weight"].to(torch.bfloat16).float()
    save_file(good | {"lm_heads.0.weight": rounded}, str(tmp_path / "v" / "model.safetensors"))
    load_medusa(tmp_path / "v", target)
    refused("its own lm_head", **{"lm_heads.0.weight": good["lm_heads.0.weight"] + 0.01})  # Medusa-1's copies
    refused("the target has 64", {"hidden_size": 4096})
    refused("missing \\['blocks.1.layers.0.weight'\\]", **{"blocks.1.layers.0.weight": None})
    refused("unexpected \\['blocks.0.layers.0.bias'", {"medusa_fc_bias": False})  # vLLM would drop them
    refused("missing \\['lm_heads.1.weight'", {"original_lm_head": False})
    dup = good["token_map"].clone()
    dup[1] = dup[0]
    refused("distinct ids", token_map=dup)
    refused("must be 47 integer ids, got \\(48,\\)", {"truncated_vocab_size": 47})
    refused("unexpected \\['extra'\\]", extra=torch.zeros(1))


def test_train_help_gives_each_method_its_own_meaning_of_a_shared_flag():
    from draftsmith.cli.options import option_fields, training_options

    fields = option_fields(training_options())
    anchors = fields["anchors"].help()
    assert "medusa: training rows per sequence (0 = every row) (default 64)" in anchors
    assert "dflash, dspark" in anchors
    heads = fields["heads"].help()
    assert heads == "Medusa: heads (the most drafts per round) [medusa; default 4]"
