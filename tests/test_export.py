"""Export to the speculators / z-lab / DeepSpec formats and import back: names, shapes and config keys
as vLLM, SGLang and speculators read them, target-layer id conventions, identical drafts after a round trip,
clear refusals of what a format cannot carry, and speculators' own classes loading our files."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace
from unittest.mock import patch

import pytest
import torch
from conftest import VOCAB, tiny_target
from safetensors.torch import load_file, save_file

from draftsmith.drafters.checkpoint import PRETRAINED, target_fingerprint
from draftsmith.drafters.dflash.checkpoint import load_drafter, save_drafter
from draftsmith.drafters.dflash.config import DFlashConfig
from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions, DFlashDrafter
from draftsmith.drafters.dflash.lookup import drop_lookup
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.errors import DraftsmithError
from draftsmith.export import FORMATS, Verifier, detect_format, export_drafter, verifier_of
from draftsmith.export.common import d2t_absolute, d2t_offsets, from_layer_ids, full_vocab, to_layer_ids

ROOT = Path(__file__).resolve().parents[1]
SPEC_PY = ROOT / ".venv-speculators" / "bin" / "python"


def make(
    target,
    dspark: bool = False,
    layers: tuple[int, ...] = (1, 3),
    draft_vocab: int | None = None,
    anchor_slot: bool = True,
    qk_norm: bool = True,
    width: dict | None = None,
    seed: int = 0,
) -> DFlashModel:
    """A random drafter for `target` with every weight (norms, Markov head) away from its init value,
    so a misplaced or transposed weight changes the drafts."""
    c, vocab = target.model.config, target.runner.vocab_size
    dims = width or dict(num_heads=4, num_kv_heads=2, head_dim=16, intermediate_size=96)
    cfg = DFlashConfig(
        hidden_size=c.hidden_size,
        **dims,
        target_layers=list(layers),
        mask_token_id=3,
        target_vocab_size=vocab,
        block_size=5,
        draft_vocab_size=draft_vocab,
        markov_rank=8 if dspark else 0,
        confidence=dspark,
        qk_norm=qk_norm,
        sample_from_anchor=anchor_slot,
        rope_theta=5000.0,
        method="dspark" if dspark else "dflash",
        target_name=target.name,
        target_fingerprint=target_fingerprint(target),
    )
    model = DFlashModel(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(1 + 0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)
        if dspark:
            model.markov_out.weight.mul_(8.0)  # a Markov bias large enough to change greedy choices
    if draft_vocab:
        model.d2t = torch.sort(torch.randperm(vocab, generator=g)[:draft_vocab]).values
    model.attach_target(
        target.model.get_input_embeddings().weight, target.model.get_output_embeddings().weight
    )
    return model.eval().requires_grad_(False)


def verifier(target) -> Verifier:
    return verifier_of(target, "org/tiny-verifier")


def drafts(
    target, model: DFlashModel, prompts: list[list[int]], n: int = 30, lossless: bool = True
) -> list[tuple]:
    """Every round's draft (tokens and DSpark confidences) while decoding the prompts greedily."""
    rounds: list[tuple] = []
    base = DSparkDrafter if model.cfg.markov_rank else DFlashDrafter

    class Recording(base):
        def propose(self, tokens, k, params, generator):
            d = super().propose(tokens, k, params, generator)
            rounds.append((len(tokens), d.tokens.tolist(), list(self.confidences)))
            return d

    # the default (prob) rule prices rows from the step-cost table, not the clock, so two runs
    # verify the same rows
    drafter = Recording.build(target, DFlashDecodeOptions(drafter=model))
    for ids in prompts:
        ids = torch.tensor(ids)
        res = speculative_generate(target.runner, drafter, ids, StopRule(n))
        if lossless:
            assert res.tokens == speculative_generate(target.runner, PlainDrafter(), ids, StopRule(n)).tokens
    return rounds


TINY_PROMPTS = [[5, 17, 40, 9, 33, 60, 12, 7], [80, 81, 4, 4, 19, 55]]

# (format, dspark, draft vocab, sample from anchor, layers)
ROUND_TRIPS = [
    ("speculators", False, None, True, (1, 3)),
    ("speculators", False, 48, True, (0, 2, 3)),
    ("speculators", True, 48, True, (1, 3)),
    ("speculators", True, None, False, (1, 3)),
    ("zlab", False, None, False, (1, 3)),
    ("deepspec", True, None, True, (0, 2, 3)),
]


@pytest.mark.parametrize("fmt,dspark,vocab,anchor_slot,layers", ROUND_TRIPS)
def test_round_trip_gives_the_same_drafts(tmp_path, fmt, dspark, vocab, anchor_slot, layers):
    target = tiny_target()
    model = make(target, dspark, layers, vocab, anchor_slot)
    export_drafter(model, fmt, tmp_path / fmt, verifier(target))
    assert detect_format(tmp_path / fmt) == fmt
    again = load_drafter(tmp_path / fmt, target)
    assert again.cfg.target_layers == list(layers)
    assert again.cfg.method == model.cfg.method and again.cfg.sample_from_anchor == anchor_slot
    assert torch.equal(again.d2t, model.d2t)
    want = drafts(target, model, TINY_PROMPTS)
    assert want and any(r[1] for r in want)
    assert drafts(target, again, TINY_PROMPTS) == want  # same tokens, same confidences, every round
    if dspark:
        assert any(r[2] for r in want)
    # and the imported drafter exports again to the same files
    export_drafter(again, fmt, tmp_path / "again", verifier(target))
    a, b = (
        load_file(str(tmp_path / fmt / "model.safetensors")),
        load_file(str(tmp_path / "again" / "model.safetensors")),
    )
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_mask_slot_layout_drafts_one_token_less_per_round():
    target = tiny_target()
    drafter = DFlashDrafter.build(target, DFlashDecodeOptions(drafter=make(target, anchor_slot=False)))
    assert drafter.default_k == 4  # block_size 5: the anchor slot drafts nothing (z-lab)
    assert DFlashDrafter.build(target, DFlashDecodeOptions(drafter=make(target))).default_k == 5


def shapes(path: Path) -> dict[str, tuple]:
    return {k: tuple(v.shape) for k, v in load_file(str(path / "model.safetensors")).items()}


def body_shapes(h: int, layers: int, k: int, nh=4, nkv=2, hd=16, inter=96) -> dict[str, tuple]:
    out = {"fc.weight": (h, k * h), "hidden_norm.weight": (h,), "norm.weight": (h,)}
    for i in range(layers):
        p = f"layers.{i}."
        out |= {
            p + "self_attn.q_proj.weight": (nh * hd, h),
            p + "self_attn.k_proj.weight": (nkv * hd, h),
            p + "self_attn.v_proj.weight": (nkv * hd, h),
            p + "self_attn.o_proj.weight": (h, nh * hd),
            p + "self_attn.q_norm.weight": (hd,),
            p + "self_attn.k_norm.weight": (hd,),
            p + "mlp.gate_proj.weight": (inter, h),
            p + "mlp.up_proj.weight": (inter, h),
            p + "mlp.down_proj.weight": (h, inter),
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
        }
    return out


QWEN3_KEYS = {
    "model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "rms_norm_eps", "vocab_size", "rope_theta",
}  # fmt: skip


def test_speculators_files_match_the_format(tmp_path):
    target = tiny_target()
    h, r, vd = target.model.config.hidden_size, 8, 48
    export_drafter(make(target, True, (1, 3), vd), "speculators", tmp_path / "s", verifier(target))
    config = json.loads((tmp_path / "s" / "config.json").read_text())
    assert "model_type" not in config
    assert config["speculators_model_type"] == "dspark" and config["architectures"] == ["DSparkSpeculator"]
    sc = config["speculators_config"]
    assert sc["algorithm"] == "dspark" and sc["default_proposal_method"] == "greedy"
    assert sc["proposal_methods"] == [
        {"proposal_type": "greedy", "speculative_tokens": 5, "verifier_accept_k": 1, "accept_tolerance": 0.0}
    ]
    assert sc["verifier"] == {"name_or_path": "org/tiny-verifier", "architectures": ["LlamaForCausalLM"]}
    tl = config["transformer_layer_config"]
    assert QWEN3_KEYS <= tl.keys() and tl["model_type"] == "qwen3" and tl["vocab_size"] == VOCAB
    assert tl["rope_parameters"] == {"rope_type": "default", "rope_theta": 5000.0}
    assert config["aux_hidden_state_layer_ids"] == [1, 3]  # vLLM convention = draftsmith keys
    assert config["draft_vocab_size"] == vd and config["block_size"] == 5 and config["mask_token_id"] == 3
    assert config["sample_from_anchor"] is True and config["sliding_window_non_causal"] is True
    assert config["target_hidden_size"] == h
    assert config["markov_rank"] == r and config["markov_head_type"] == "vanilla"
    assert config["enable_confidence_head"] is True and config["confidence_head_with_markov"] is True
    want = body_shapes(h, 1, 2) | {
        "lm_head.weight": (vd, h),
        "d2t": (vd,),
        "t2d": (VOCAB,),
        "markov_head.markov_w1.weight": (VOCAB, r),
        "markov_head.markov_w2.weight": (vd, r),
        "confidence_head.proj.weight": (1, h + r),
        "confidence_head.proj.bias": (1,),
    }
    assert shapes(tmp_path / "s") == want
    w = load_file(str(tmp_path / "s" / "model.safetensors"))
    assert w["d2t"].dtype == torch.int64 and w["t2d"].dtype == torch.bool and int(w["t2d"].sum()) == vd
    target_ids = torch.arange(vd) + w["d2t"]  # offsets: target_id = i + d2t[i]
    assert torch.equal(w["t2d"].nonzero().flatten(), target_ids)
    # a full-vocabulary DFlash drafter that drafts from the anchor slot: a DSpark without heads, since
    # vLLM's DFlash runner refuses sample_from_anchor and its DSpark runner honours it
    export_drafter(make(target), "speculators", tmp_path / "f", verifier(target))
    config = json.loads((tmp_path / "f" / "config.json").read_text())
    assert config["speculators_model_type"] == "dspark" and config["architectures"] == ["DSparkSpeculator"]
    assert config["markov_rank"] == 0 and config["enable_confidence_head"] is False
    assert config["sample_from_anchor"] is True and config["confidence_head_with_markov"] is False
    assert shapes(tmp_path / "f") == body_shapes(h, 1, 2)
    assert load_drafter(tmp_path / "f", target).cfg.method == "dflash"
    # the mask-slot layout (z-lab's) is a speculators dflash: no lm_head / d2t / heads
    export_drafter(make(target, anchor_slot=False), "speculators", tmp_path / "m", verifier(target))
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["speculators_model_type"] == "dflash" and "markov_rank" not in config
    assert config["sample_from_anchor"] is False and shapes(tmp_path / "m") == body_shapes(h, 1, 2)


def test_zlab_files_match_the_format(tmp_path):
    target = tiny_target()
    h = target.model.config.hidden_size
    export_drafter(make(target, anchor_slot=False), "zlab", tmp_path / "z", verifier(target))
    config = json.loads((tmp_path / "z" / "config.json").read_text())
    assert config["architectures"] == ["DFlashDraftModel"] and QWEN3_KEYS <= config.keys()
    assert config["model_type"] == "qwen3" and config["block_size"] == 5
    assert config["num_target_layers"] == 4
    assert config["dflash_config"] == {
        "mask_token_id": 3,
        "target_layer_ids": [0, 2],
    }  # decoder layers: key - 1
    assert shapes(tmp_path / "z") == body_shapes(h, 1, 2)


def test_deepspec_files_match_the_format(tmp_path):
    target = tiny_target()
    h, r = target.model.config.hidden_size, 8
    export_drafter(make(target, True, (0, 2, 3)), "deepspec", tmp_path / "d", verifier(target))
    config = json.loads((tmp_path / "d" / "config.json").read_text())
    assert config["architectures"] == ["Qwen3DSparkModel"] and QWEN3_KEYS <= config.keys()
    assert config["target_layer_ids"] == [-1, 1, 2]  # -1 = the embedding output
    for key, value in dict(
        block_size=5, mask_token_id=3, num_target_layers=4, markov_rank=r, markov_head_type="vanilla",
        enable_confidence_head=True, confidence_head_with_markov=True,
    ).items():  # fmt: skip
        assert config[key] == value, key
    assert isinstance(config["num_anchors"], int)
    assert shapes(tmp_path / "d") == body_shapes(h, 1, 3) | {
        "embed_tokens.weight": (VOCAB, h),
        "lm_head.weight": (VOCAB, h),
        "markov_head.markov_w1.weight": (VOCAB, r),
        "markov_head.markov_w2.weight": (VOCAB, r),
        "confidence_head.proj.weight": (1, h + r),
        "confidence_head.proj.bias": (1,),
    }


def test_layer_id_and_vocab_conventions():
    assert to_layer_ids([2, 9, 15, 21, 28]) == [1, 8, 14, 20, 27]  # SmolLM2's default, SGLang ids
    assert from_layer_ids([-1, 1, 8]) == [0, 2, 9]
    d2t = torch.tensor([0, 4, 5, 90])
    assert d2t_offsets(d2t).tolist() == [0, 3, 3, 87] and torch.equal(d2t_absolute(d2t_offsets(d2t)), d2t)


@pytest.mark.parametrize(
    "fmt,kwargs,match",
    [
        ("speculators", dict(qk_norm=False), "q/k RMSNorm"),
        ("zlab", dict(dspark=True, anchor_slot=False), "Markov head"),
        ("zlab", dict(), "sample_from_anchor"),
        ("zlab", dict(draft_vocab=48, anchor_slot=False), "draft vocabulary"),
        ("zlab", dict(layers=(0, 2), anchor_slot=False), "embedding output"),
        ("deepspec", dict(dspark=True, draft_vocab=48), "draft vocabulary"),
        ("deepspec", dict(dspark=True, anchor_slot=False), "mask slots"),
        ("deepspec", dict(), "markov_rank > 0"),  # SGLang's DSpark path reads this format
    ],
)
def test_what_a_format_cannot_carry_is_refused_by_name(tmp_path, fmt, kwargs, match):
    target = tiny_target()
    with pytest.raises(DraftsmithError, match=match):
        export_drafter(make(target, **kwargs), fmt, tmp_path / "x", verifier(target))
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "feature,value", [("anchor_context", True), ("markov_state", 16), ("lookup_input", 4)]
)
def test_draftsmith_only_features_are_refused(tmp_path, feature, value):
    target = tiny_target()
    model = make(target)
    setattr(model.cfg, feature, value)
    for fmt in FORMATS:
        with pytest.raises(DraftsmithError, match=feature):
            export_drafter(model, fmt, tmp_path / fmt, verifier(target))


SHIPPED_FORMATS = {"dflash": ("speculators", "zlab"), "dspark": ("speculators", "deepspec")}


@pytest.mark.parametrize("method", ["dflash", "dspark"])
def test_shipped_drafters_export_to_every_format_of_their_method(tmp_path, smollm, method):
    """The shipped pair is in the public layouts (q/k norms, the whole vocabulary; DFlash in z-lab's
    mask-slot layout, DSpark drafting from the anchor), the DSpark once its prompt-lookup input is
    left out (`export --no-lookup`): each format of its method takes it and reads it back with the
    same weights. DeepSpec's format is DSpark's (anchor slot, a Markov head SGLang's DSpark path
    requires): a DFlash is refused by name."""
    model = drop_lookup(load_drafter(PRETRAINED / f"smollm2-{method}", smollm))
    assert model.cfg.qk_norm and not model.cfg.lookup_input and full_vocab(model)
    assert model.cfg.sample_from_anchor == (method == "dspark")
    for fmt in SHIPPED_FORMATS[method]:
        export_drafter(model, fmt, tmp_path / fmt, verifier_of(smollm))
        again = load_drafter(tmp_path / fmt, smollm)
        assert again.cfg.method == method and again.cfg.sample_from_anchor == model.cfg.sample_from_anchor
        torch.testing.assert_close(again.fc.weight, model.fc.weight)
    if method == "dflash":
        with pytest.raises(DraftsmithError, match="Markov head"):
            export_drafter(model, "deepspec", tmp_path / "deepspec", verifier_of(smollm))


def test_bad_directories_are_refused_clearly(tmp_path):
    target = tiny_target()
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(DraftsmithError, match="speculators_model_type dflash or dspark.*Qwen3DSparkModel"):
        load_drafter(tmp_path / "odd", target)
    export_drafter(make(target, True, draft_vocab=48), "speculators", tmp_path / "s", verifier(target))
    config = json.loads((tmp_path / "s" / "config.json").read_text())
    (tmp_path / "s" / "config.json").write_text(json.dumps(config | {"speculators_model_type": "eagle3"}))
    with pytest.raises(DraftsmithError, match="'eagle3'"):
        load_drafter(tmp_path / "s", target)
    (tmp_path / "s" / "config.json").write_text(json.dumps(config | {"markov_head_type": "gated"}))
    with pytest.raises(DraftsmithError, match="gated"):
        load_drafter(tmp_path / "s", target)
    (tmp_path / "s" / "config.json").write_text(json.dumps(config | {"aux_hidden_state_layer_ids": [1, 9]}))
    with pytest.raises(DraftsmithError, match="does not fit"):
        load_drafter(tmp_path / "s", target)
    (tmp_path / "s" / "config.json").write_text(json.dumps(config))
    weights = load_file(str(tmp_path / "s" / "model.safetensors"))
    save_file(
        {**weights, "lm_head.weight": weights["lm_head.weight"] * 2},
        str(tmp_path / "s" / "model.safetensors"),
    )
    with pytest.raises(DraftsmithError, match="lm_head.weight is not the target.s own"):
        load_drafter(tmp_path / "s", target)
    save_file(
        {k: v for k, v in weights.items() if "q_norm" not in k}, str(tmp_path / "s" / "model.safetensors")
    )
    with pytest.raises(DraftsmithError, match="no weight 'layers.0.self_attn.q_norm.weight'"):
        load_drafter(tmp_path / "s", target)
    save_file(  # a diverged run's export
        {**weights, "lm_head.weight": weights["lm_head.weight"] * float("inf")},
        str(tmp_path / "s" / "model.safetensors"),
    )
    with pytest.raises(DraftsmithError, match="non-finite .NaN or inf. weights in lm_head.weight"):
        load_drafter(tmp_path / "s", target)
    (tmp_path / "s" / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(DraftsmithError, match="could not read"):
        load_drafter(tmp_path / "s", target)
    with pytest.raises(DraftsmithError, match="unknown export format"):
        export_drafter(make(target), "onnx", tmp_path / "o", verifier(target))


def test_method_mismatch_on_an_imported_drafter(tmp_path):
    target = tiny_target()
    export_drafter(make(target, True), "deepspec", tmp_path / "d", verifier(target))
    with pytest.raises(DraftsmithError, match="use --method dspark"):
        DFlashDrafter.build(target, DFlashDecodeOptions(drafter=str(tmp_path / "d")))
    assert (
        DSparkDrafter.build(target, DFlashDecodeOptions(drafter=str(tmp_path / "d"))).model.cfg.markov_vocab
        == "target"
    )


def test_own_checkpoints_keep_loading_without_the_new_fields(tmp_path):
    """Config files written before qk_norm / sample_from_anchor / markov_vocab existed load as before."""
    target = tiny_target()
    model = make(target, True, qk_norm=False)
    save_drafter(model, tmp_path / "d")
    data = json.loads((tmp_path / "d" / "config.json").read_text())
    for key in ("qk_norm", "sample_from_anchor", "markov_vocab"):
        data.pop(key)
    (tmp_path / "d" / "config.json").write_text(json.dumps(data))
    again = load_drafter(tmp_path / "d", target)
    assert not again.cfg.qk_norm and again.cfg.sample_from_anchor and again.cfg.markov_vocab == "draft"
    assert drafts(target, again, TINY_PROMPTS[:1]) == drafts(target, model, TINY_PROMPTS[:1])


SMOL = dict(num_heads=9, num_kv_heads=3, head_dim=64, intermediate_size=128)


@pytest.mark.parametrize(
    "fmt,dspark,vocab,anchor_slot", [("speculators", True, 8192, True), ("zlab", False, None, False)]
)
def test_round_trip_on_the_default_target(tmp_path, smollm, fmt, dspark, vocab, anchor_slot):
    """Same drafts (and confidences) on the real SmolLM2 target, exported by the CLI's path."""
    from draftsmith.cli.export import cmd_export

    model = make(smollm, dspark, (2, 15, 28), vocab, anchor_slot, width=SMOL, seed=1)
    save_drafter(model, tmp_path / "ours", dtype=torch.float16)
    args = dict(
        format=fmt, drafter=str(tmp_path / "ours"), out=str(tmp_path / fmt), verifier_name=None, target=None
    )
    with patch("draftsmith.cli.common.load_target", return_value=smollm):  # the fixture's target, loaded once
        assert cmd_export(argparse.Namespace(**args)) == 0
    config = json.loads((tmp_path / fmt / "config.json").read_text())
    if fmt == "speculators":
        assert config["aux_hidden_state_layer_ids"] == [2, 15, 28]
        assert (
            config["speculators_config"]["verifier"]["name_or_path"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
        )
    else:
        assert (
            config["dflash_config"]["target_layer_ids"] == [1, 14, 27] and config["num_target_layers"] == 30
        )
    assert config["dtype"] == "float16"
    original = load_drafter(tmp_path / "ours", smollm)
    imported = load_drafter(tmp_path / fmt, smollm)
    prompts = [smollm.encode("Write a haiku about caches.")]
    want = drafts(smollm, original, prompts, n=12, lossless=False)  # lossless decoding: tests/test_dflash.py
    assert len(want) >= 3 and drafts(smollm, imported, prompts, n=12, lossless=False) == want


SPECULATORS_CHECK = r"""
import json, sys, torch
from safetensors.torch import load_file
from speculators import SpeculatorModelConfig
from speculators.models import (
    DFlashDraftModel, DFlashSpeculatorConfig, DSparkDraftModel, DSparkSpeculatorConfig
)
classes = {
    "dflash": (DFlashSpeculatorConfig, DFlashDraftModel),
    "dspark": (DSparkSpeculatorConfig, DSparkDraftModel),
}
out = {}
for path in sys.argv[1:]:
    kind = json.load(open(path + "/config.json"))["speculators_model_type"]
    config_cls, model_cls = classes[kind]
    config = config_cls.from_pretrained(path)
    assert type(SpeculatorModelConfig.from_pretrained(path)) is config_cls
    config.transformer_layer_config._attn_implementation = "eager"
    model = model_cls.from_pretrained(path, config=config)
    state, ours = model.state_dict(), load_file(path + "/model.safetensors")
    bad = [k for k, v in ours.items() if k not in state or not torch.equal(state[k].to(v.dtype), v)]
    tl = config.transformer_layer_config
    # speculators' own modules on the inputs our drafter saw: block after context, full attention
    io, m = load_file(path + "/io.safetensors"), model.eval()
    with torch.no_grad():
        ctx, x = m.hidden_norm(m.fc(io["feats"])), m.embed_tokens(io["ids"])
        pos = torch.arange(ctx.shape[1] + x.shape[1])[None]
        emb = m.rotary_emb(x, pos)
        for layer in m.layers:
            x = layer(hidden_states=x, target_hidden=ctx, attention_mask=None, position_embeddings=emb)
        h = m.norm(x)
        logits = m.lm_head(h)
        conf_err = 0.0
        if kind == "dspark" and m.markov_head is not None:  # (a headless DSpark: a DFlash's export)
            prev = io["prev"][None]
            logits = logits + m.markov_head.block_bias(prev_token_ids=prev, hidden_states=h)
            conf = m.confidence_head(torch.cat([h, m.markov_head.prev_embeddings(prev)], -1))
            conf_err = float((conf[0] - io["conf"]).abs().max())
    out[path] = dict(
        kind=kind, bad=bad, missing=sorted(set(state) - set(ours)), layers=config.aux_hidden_state_layer_ids,
        theta=tl.rope_parameters["rope_theta"], block=config.block_size, anchor=config.sample_from_anchor,
        n_layers=len(model.layers), draft_vocab=model.draft_vocab_size,
        logit_err=float((logits[0] - io["logits"]).abs().max()), conf_err=conf_err,
    )
print(json.dumps(out))
"""


def block_outputs(model: DFlashModel) -> dict[str, torch.Tensor]:
    """One drafted block on random context features: our logits (Markov bias included) and confidences."""
    cfg, g = model.cfg, torch.Generator().manual_seed(3)
    n, b = 6, cfg.block_size
    feats = torch.randn(1, n, len(cfg.target_layers) * cfg.hidden_size, generator=g)
    ids = torch.full((1, b), cfg.mask_token_id)
    ids[0, 0] = 17
    prev = torch.tensor([17, 40, 9, 33, 60])[:b]  # each slot's previous token (target ids)
    with torch.no_grad():
        ctx = model.fuse_context(feats)
        kv = [layer.project_context(ctx, torch.arange(n)[None]) for layer in model.layers]
        mask = torch.ones(1, b, n + b, dtype=torch.bool)
        states = model.backbone(ids, torch.arange(n, n + b)[None], kv, mask)[0]
        logits = model.base_logits(states)
        out = {"feats": feats, "ids": ids, "prev": prev}
        if cfg.markov_rank:
            logits = logits + model.markov_bias(model.prev_index(prev))
            out["conf"] = model.confidence_logit(states, model.prev_index(prev))
    return out | {"logits": logits}


@pytest.mark.skipif(
    not SPEC_PY.is_file(), reason="no .venv-speculators (setup.sh creates it): speculators 0.9.0 absent"
)
def test_speculators_own_classes_load_our_exports(tmp_path):
    target = tiny_target()
    target.model.save_pretrained(tmp_path / "verifier")  # speculators reads the verifier's embedding and head
    cases = {
        "dflash": make(target, layers=(1, 3), anchor_slot=False),  # z-lab's layout: a speculators dflash
        "dflash-anchor": make(target, layers=(1, 3)),  # draftsmith's: a speculators dspark without heads
        "dspark": make(target, True, (0, 2, 3), draft_vocab=48),
    }
    for name, model in cases.items():
        export_drafter(model, "speculators", tmp_path / name, verifier_of(target, str(tmp_path / "verifier")))
        save_file(block_outputs(model), str(tmp_path / name / "io.safetensors"))
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    run = subprocess.run(
        [str(SPEC_PY), "-c", SPECULATORS_CHECK, *(str(tmp_path / n) for n in cases)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    for name, model in cases.items():
        r = got[str(tmp_path / name)]
        kind = {"dflash": "dflash", "dflash-anchor": "dspark", "dspark": "dspark"}[name]
        assert r["kind"] == kind and r["bad"] == [], r
        assert r["layers"] == model.cfg.target_layers and r["theta"] == 5000.0 and r["block"] == 5
        assert r["anchor"] is model.cfg.sample_from_anchor and r["n_layers"] == 1
        assert r["draft_vocab"] == model.d2t.shape[0]
        # filled by speculators from the verifier: embedding, verifier head and norm (+ lm_head at full vocab)
        assert r["logit_err"] < 1e-4 and r["conf_err"] < 1e-4, r  # speculators computes what we compute
        assert set(r["missing"]) <= {
            "embed_tokens.weight",
            "verifier_lm_head.weight",
            "verifier_norm.weight",
            "lm_head.weight",
        }


def test_cli_export_errors_are_one_line(tmp_path, capsys):
    from draftsmith.cli import main

    out = ["--out", str(tmp_path / "o")]
    assert main(["export", "--format", "zlab", "--drafter", str(tmp_path / "none"), *out]) == 2
    assert "drafter directory not found" in capsys.readouterr().err
    target = tiny_target()
    save_drafter(make(target, qk_norm=False), tmp_path / "d")
    with patch("draftsmith.cli.common.load_target", return_value=target):
        assert main(["export", "--format", "speculators", "--drafter", str(tmp_path / "d"), *out]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: cannot export") and "q/k RMSNorm" in err
        save_drafter(make(target), tmp_path / "d")
        assert main(["export", "--format", "speculators", "--drafter", str(tmp_path / "d"), *out]) == 0
    assert json.loads(capsys.readouterr().out)["verifier"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert detect_format(tmp_path / "o") == "speculators"
    # an existing file as --out, --no-lookup on a drafter without that input, a bad cut: one line each
    (tmp_path / "file").write_text("x")
    d = ["--drafter", str(tmp_path / "d")]
    for argv, message in (
        (["--out", str(tmp_path / "file")], "is a file; give a directory"),
        (["--no-lookup", *out], "no prompt-lookup input to leave out"),
        (["--draft-vocab", "-1", *out], "--draft-vocab must be >= 0"),
    ):
        assert main(["export", "--format", "speculators", *d, *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, err


# --- EAGLE-3, MTP and the distilled draft ----------------------------------------------------------

from draftsmith.drafters.eagle3 import export as eagle3_export  # noqa: E402
from draftsmith.drafters.eagle3.checkpoint import load_drafter as load_eagle3  # noqa: E402
from draftsmith.drafters.eagle3.checkpoint import save_drafter as save_eagle3  # noqa: E402
from draftsmith.drafters.eagle3.drafter import Eagle3Drafter  # noqa: E402
from draftsmith.drafters.eagle3.model import Eagle3Model  # noqa: E402
from draftsmith.drafters.eagle3.recipe import Eagle3Options, drafter_config  # noqa: E402
from draftsmith.drafters.mtp import export as mtp_export  # noqa: E402
from draftsmith.drafters.registry import METHODS  # noqa: E402
from draftsmith.export.methods import method_of  # noqa: E402


def make_eagle3(
    target, draft_vocab: int | None = None, layers: str = "1,2,3", seed: int = 0, **cfg
) -> Eagle3Model:
    """A random EAGLE-3 drafter with every weight (norms too) away from its init value."""
    opts = Eagle3Options(target_layers=layers, draft_vocab=draft_vocab or 0, ttt_steps=4)
    config = drafter_config(target, opts, [0, 1, 2, 3])
    for key, value in cfg.items():
        setattr(config, key, value)
    model = Eagle3Model(config)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            scale = 0.3 if p.dim() == 1 else 1 / p.shape[1] ** 0.5
            p.copy_((1 if p.dim() == 1 else 0) + scale * torch.randn(p.shape, generator=g))
        model.lm_head.weight.mul_(3.0)
    if draft_vocab:
        model.set_draft_vocab(torch.sort(torch.randperm(VOCAB, generator=g)[:draft_vocab]).values)
    model.attach_target(target.model.get_input_embeddings().weight)
    return model.eval().requires_grad_(False)


def eagle3_drafts(target, model: Eagle3Model, prompts: list[list[int]], n: int = 30) -> list[tuple]:
    rounds: list[tuple] = []

    class Recording(Eagle3Drafter):
        def propose(self, tokens, k, params, generator):
            d = super().propose(tokens, k, params, generator)
            rounds.append((len(tokens), d.tokens.tolist()))
            return d

    drafter = Recording.build(target, TrainedDecodeOptions(drafter=model), k=4)
    for ids in prompts:
        ids = torch.tensor(ids)
        res = speculative_generate(target.runner, drafter, ids, StopRule(n), k=4, adaptive=False)
        assert res.tokens == speculative_generate(target.runner, PlainDrafter(), ids, StopRule(n)).tokens
    return rounds


@pytest.mark.parametrize("fmt", eagle3_export.FORMATS)
@pytest.mark.parametrize("vocab", [None, 48])
def test_eagle3_round_trip_gives_the_same_drafts(tmp_path, fmt, vocab):
    target = tiny_target()
    model = make_eagle3(target, vocab)
    eagle3_export.WRITERS[fmt](model, tmp_path / fmt, verifier(target))
    assert eagle3_export.detect_format(tmp_path / fmt) == fmt and method_of(tmp_path / fmt) == "eagle3"
    again = load_eagle3(tmp_path / fmt, target)
    assert again.cfg.target_layers == [1, 2, 3] and again.cfg.vocab == model.cfg.vocab
    assert torch.equal(again.draft_ids, model.draft_ids)
    assert again.cfg.ttt_steps == (4 if fmt == "speculators" else 7)  # SGLang's config has no draft length
    want = eagle3_drafts(target, model, TINY_PROMPTS)
    assert want and any(r[1] for r in want)
    assert eagle3_drafts(target, again, TINY_PROMPTS) == want
    eagle3_export.WRITERS[fmt](again, tmp_path / "again", verifier(target))  # and exports to the same files
    a, b = (load_file(str(tmp_path / d / "model.safetensors")) for d in (fmt, "again"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def eagle3_shapes(h: int, k: int, vd: int, nh=4, nkv=2, hd=16, inter=128, prefix="midlayer.") -> dict:
    return {
        prefix + "self_attn.q_proj.weight": (nh * hd, 2 * h),
        prefix + "self_attn.k_proj.weight": (nkv * hd, 2 * h),
        prefix + "self_attn.v_proj.weight": (nkv * hd, 2 * h),
        prefix + "self_attn.o_proj.weight": (h, nh * hd),
        prefix + "mlp.gate_proj.weight": (inter, h),
        prefix + "mlp.up_proj.weight": (inter, h),
        prefix + "mlp.down_proj.weight": (h, inter),
        prefix + "input_layernorm.weight": (h,),
        prefix + "hidden_norm.weight": (h,),
        prefix + "post_attention_layernorm.weight": (h,),
        "fc.weight": (h, k * h),
        "norm.weight": (h,),
        "lm_head.weight": (vd, h),
    }


LLAMA_KEYS = QWEN3_KEYS - {"model_type"} | {"model_type", "max_position_embeddings", "tie_word_embeddings"}


def test_eagle3_files_match_the_formats(tmp_path):
    target = tiny_target()
    h, vd = target.model.config.hidden_size, 48
    model = make_eagle3(target, vd, layers="1,3")
    eagle3_export.write_sglang(model, tmp_path / "g", verifier(target))
    config = json.loads((tmp_path / "g" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"] and config["model_type"] == "llama"
    assert LLAMA_KEYS <= config.keys() and config["num_hidden_layers"] == 1
    assert config["vocab_size"] == VOCAB and config["draft_vocab_size"] == vd
    assert config["tie_word_embeddings"] is False and config["target_hidden_size"] == h
    # SGLang captures layer id + 1 (the input of the next layer): its ids are draftsmith keys - 1
    assert config["eagle_config"] == {
        "eagle_aux_hidden_state_layer_ids": [0, 2],
        "use_aux_hidden_state": True,
    }
    # vLLM reads the same directory but never converts eagle_config's ids: its own key, its convention
    assert config["eagle_aux_hidden_state_layer_ids"] == [1, 3]
    assert shapes(tmp_path / "g") == eagle3_shapes(h, 2, vd) | {"d2t": (vd,), "t2d": (VOCAB,)}
    w = load_file(str(tmp_path / "g" / "model.safetensors"))
    assert w["d2t"].dtype == torch.int64 and w["t2d"].dtype == torch.bool
    assert torch.equal(torch.arange(vd) + w["d2t"], model.draft_ids) and int(w["t2d"].sum()) == vd

    eagle3_export.write_speculators(model, tmp_path / "s", verifier(target))
    config = json.loads((tmp_path / "s" / "config.json").read_text())
    assert "model_type" not in config and config["speculators_model_type"] == "eagle3"
    sc = config["speculators_config"]
    assert sc["algorithm"] == "eagle3" and sc["proposal_methods"][0]["speculative_tokens"] == 4
    assert sc["verifier"] == {"name_or_path": "org/tiny-verifier", "architectures": ["LlamaForCausalLM"]}
    tl = config["transformer_layer_config"]
    assert LLAMA_KEYS <= tl.keys() and tl["model_type"] == "llama" and tl["num_hidden_layers"] == 1
    assert tl["num_aux_hidden_states"] == 2  # K != 3
    assert config["eagle_aux_hidden_state_layer_ids"] == [1, 3]  # vLLM convention = draftsmith keys
    assert config["norm_before_residual"] is False and config["draft_vocab_size"] == vd
    assert not (config["norm_before_fc"] or config["fc_norm"] or config["norm_output"])
    assert shapes(tmp_path / "s") == eagle3_shapes(h, 2, vd, prefix="layers.0.") | {
        "d2t": (vd,),
        "t2d": (VOCAB,),
        "embed_tokens.weight": (VOCAB, h),
    }
    eagle3_export.write_speculators(make_eagle3(target), tmp_path / "f", verifier(target))
    assert "d2t" not in shapes(tmp_path / "f")  # full vocabulary: no mapping, as speculators saves it


@pytest.mark.parametrize(
    "fmt,kwargs,match",
    [
        ("sglang", dict(layers="1,1,3"), "more than once"),
        ("speculators", dict(layers="1,1,3"), "more than once"),
        ("sglang", dict(norm_before_residual=True), "norm_before_residual"),
        ("sglang", dict(layers="0,2,3"), "embedding output"),
    ],
)
def test_eagle3_refuses_what_a_format_cannot_carry(tmp_path, fmt, kwargs, match):
    target = tiny_target()
    with pytest.raises(DraftsmithError, match=match):
        eagle3_export.WRITERS[fmt](make_eagle3(target, **kwargs), tmp_path / "x", verifier(target))
    assert not (tmp_path / "x").exists()


def test_eagle3_norm_before_residual_goes_to_speculators_and_back(tmp_path):
    target = tiny_target()
    model = make_eagle3(target, norm_before_residual=True)
    eagle3_export.write_speculators(model, tmp_path / "s", verifier(target))
    again = load_eagle3(tmp_path / "s", target)
    assert again.cfg.norm_before_residual is True
    assert eagle3_drafts(target, again, TINY_PROMPTS[:1]) == eagle3_drafts(target, model, TINY_PROMPTS[:1])


def test_eagle3_imports_refuse_what_draftsmith_cannot_run(tmp_path):
    target = tiny_target()
    eagle3_export.write_speculators(make_eagle3(target, 48), tmp_path / "s", verifier(target))
    good = json.loads((tmp_path / "s" / "config.json").read_text())

    def load_with(**change):
        (tmp_path / "s" / "config.json").write_text(json.dumps(good | change))
        return load_eagle3(tmp_path / "s", target)

    with pytest.raises(DraftsmithError, match="norm_output"):
        load_with(norm_output=True)
    with pytest.raises(DraftsmithError, match="'qwen3' EAGLE-3 layer"):
        load_with(transformer_layer_config=good["transformer_layer_config"] | {"model_type": "qwen3"})
    with pytest.raises(DraftsmithError, match="does not fit"):
        load_with(eagle_aux_hidden_state_layer_ids=[1, 2, 9])
    with pytest.raises(DraftsmithError, match="'mtp' drafter"):
        load_with(speculators_model_type="mtp")
    (tmp_path / "s" / "config.json").write_text(json.dumps(good))
    weights = load_file(str(tmp_path / "s" / "model.safetensors"))
    save_file(
        weights | {"embed_tokens.weight": weights["embed_tokens.weight"] + 1},
        str(tmp_path / "s" / "model.safetensors"),
    )
    with pytest.raises(DraftsmithError, match="embed_tokens.weight is not the target.s own"):
        load_eagle3(tmp_path / "s", target)
    save_file({k: v for k, v in weights.items() if k != "d2t"}, str(tmp_path / "s" / "model.safetensors"))
    with pytest.raises(DraftsmithError, match="no d2t"):
        load_eagle3(tmp_path / "s", target)
    # a DFlash export is not an EAGLE-3 drafter, and the other way round
    export_drafter(make(target), "speculators", tmp_path / "d", verifier(target))
    with pytest.raises(DraftsmithError, match="'dspark' drafter; method eagle3"):
        load_eagle3(tmp_path / "d", target)
    eagle3_export.write_sglang(make_eagle3(target), tmp_path / "g", verifier(target))
    with pytest.raises(DraftsmithError, match="not a drafter draftsmith can load"):
        load_drafter(tmp_path / "g", target)


def make_mtp_head(arch: str, **opts):
    import numpy as np

    from draftsmith.drafters.mtp.checkpoint import ready_for
    from draftsmith.drafters.mtp.recipe import MTPOptions, MTPRecipe

    target = tiny_target(arch)
    torch.manual_seed(0)
    data = SimpleNamespace(token_counts=lambda v: np.arange(v))  # token frequencies for a reduced vocab
    model = MTPRecipe().build(target, MTPOptions(**({"draft_vocab": 0} | opts)), [1], data)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(1 + 0.3 * torch.randn(p.shape))
    return target, ready_for(model, target)


def test_mtp_speculators_export_is_refused_by_name(tmp_path):
    """Every draftsmith MTP head reads the target's final-norm state; speculators' MTP reads the last
    layer's output before the final norm, so no head can be written without drafting differently."""
    target, model = make_mtp_head("llama", draft_vocab=48)
    with pytest.raises(DraftsmithError, match="'llama' decoder layer.*reduced draft vocabulary.*final-norm"):
        mtp_export.write_speculators(model, tmp_path / "m", verifier(target))
    target, model = make_mtp_head("qwen3")
    with pytest.raises(DraftsmithError, match=r"speculators format: it reads the target's final-norm state"):
        mtp_export.write_speculators(model, tmp_path / "m", verifier(target))
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("order", ["eh", "he"])
def test_mtp_speculators_layout_names_and_shapes(order):
    target, model = make_mtp_head("qwen3")
    model.cfg.order = order
    config, weights = mtp_export.files(model, verifier(target))
    assert config["speculators_model_type"] == "mtp" and config["num_nextn_predict_layers"] == 1
    tl = config["transformer_layer_config"]
    assert tl["model_type"] == "qwen3" and tl["num_hidden_layers"] == 4 and tl["vocab_size"] == VOCAB
    h, p = 64, "mtp_layers.0."
    got = {k: tuple(v.shape) for k, v in weights.items()}
    assert got == {
        p + "token_layernorm.weight": (h,), p + "hidden_layernorm.weight": (h,),
        p + "input_proj.weight": (h, 2 * h), p + "final_layernorm.weight": (h,),
        p + "self_attn.q_proj.weight": (64, h), p + "self_attn.k_proj.weight": (32, h),
        p + "self_attn.v_proj.weight": (32, h), p + "self_attn.o_proj.weight": (h, 64),
        p + "self_attn.q_norm.weight": (16,), p + "self_attn.k_norm.weight": (16,),
        p + "mlp.gate_proj.weight": (128, h), p + "mlp.up_proj.weight": (128, h),
        p + "mlp.down_proj.weight": (h, 128),
        p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
    }  # fmt: skip
    proj = model.eh_proj.weight
    first = proj[:, :h] if order == "eh" else proj[:, h:]  # the embedding half comes first in theirs
    assert torch.equal(weights[p + "input_proj.weight"][:, :h], first)


def test_export_formats_follow_the_drafters_method(tmp_path, capsys):
    from draftsmith.cli import main

    target = tiny_target()
    save_eagle3(make_eagle3(target, 48), tmp_path / "e")
    assert method_of(tmp_path / "e") == "eagle3"
    save_drafter(make(target, True), tmp_path / "d")
    assert method_of(tmp_path / "d") == "dspark"
    out = ["--out", str(tmp_path / "o")]
    with patch("draftsmith.cli.common.load_target", return_value=target):
        assert main(["export", "--format", "zlab", "--drafter", str(tmp_path / "e"), *out]) == 2
        assert "format 'zlab' does not fit a eagle3 drafter; its formats: sglang, speculators" in (
            capsys.readouterr().err
        )
        assert main(["export", "--format", "sglang", "--drafter", str(tmp_path / "d"), *out]) == 2
        assert "its formats: speculators, zlab, deepspec" in capsys.readouterr().err
        assert main(["export", "--format", "sglang", "--drafter", str(tmp_path / "e"), *out]) == 0
    assert eagle3_export.detect_format(tmp_path / "o") == "sglang"
    assert METHODS["mtp"].export_formats == ("speculators",)
    assert METHODS["distilled"].export_formats == ("hf",)


def test_distilled_draft_exports_as_a_plain_hf_directory(tmp_path):
    from test_distilled import hf_target
    from transformers import AutoModelForCausalLM

    from draftsmith.cli.export import cmd_export
    from draftsmith.drafters.distilled.checkpoint import META, save_draft
    from draftsmith.drafters.distilled.model import DistilledDraft

    target = hf_target("llama")
    save_draft(DistilledDraft.from_target(target, 2, "first"), tmp_path / "draft")
    assert method_of(tmp_path / "draft") == "distilled"
    args = dict(
        format="hf",
        drafter=str(tmp_path / "draft"),
        out=str(tmp_path / "hf"),
        verifier_name=None,
        target=None,
    )
    with patch("draftsmith.cli.common.load_target", return_value=target):
        assert cmd_export(argparse.Namespace(**args)) == 0
        with pytest.raises(DraftsmithError, match="its formats: hf"):
            cmd_export(argparse.Namespace(**(args | {"format": "speculators"})))
    assert not (tmp_path / "hf" / META).exists() and (tmp_path / "hf" / "tokenizer.json").is_file()
    lm = AutoModelForCausalLM.from_pretrained(tmp_path / "hf")
    assert lm.config.vocab_size == target.model.config.vocab_size and lm.config.num_hidden_layers == 2
    with patch("draftsmith.cli.common.load_target", return_value=hf_target("qwen3")):  # another target
        with pytest.raises(DraftsmithError, match="distilled from target"):
            cmd_export(argparse.Namespace(**(args | {"out": str(tmp_path / "x")})))
    (tmp_path / "draft" / "config.json").unlink()  # a copy that holds only its layers and metadata
    with patch("draftsmith.cli.common.load_target", return_value=target):
        with pytest.raises(DraftsmithError, match="no readable config.json"):
            cmd_export(argparse.Namespace(**(args | {"out": str(tmp_path / "y")})))


SPECULATORS_EAGLE3_MTP_CHECK = r"""
import json, sys, torch
from safetensors.torch import load_file
from speculators import SpeculatorModelConfig
from speculators.models import Eagle3DraftModel, Eagle3SpeculatorConfig, MTPDraftModel, MTPSpeculatorConfig
classes = {"eagle3": (Eagle3SpeculatorConfig, Eagle3DraftModel), "mtp": (MTPSpeculatorConfig, MTPDraftModel)}
out = {}
for path in sys.argv[1:]:
    config = json.load(open(path + "/config.json"))
    kind = config["speculators_model_type"]
    config_cls, model_cls = classes[kind]
    config = config_cls.from_pretrained(path)
    assert type(SpeculatorModelConfig.from_pretrained(path)) is config_cls
    config.transformer_layer_config._attn_implementation = "eager"
    model = model_cls.from_pretrained(path, config=config).eval()
    state, ours = model.state_dict(), load_file(path + "/model.safetensors")
    bad = [k for k, v in ours.items() if k not in state or not torch.equal(state[k].to(v.dtype), v)]
    io, got = load_file(path + "/io.safetensors"), []
    with torch.no_grad():
        if kind == "eagle3":  # speculators' own training-time-test forward, its lm_head outputs per step
            hook = model.lm_head.register_forward_hook(lambda m, i, o: got.append(o[0]))
            steps = io["logits"].shape[0]
            docs = torch.zeros_like(io["ids"])
            model(hidden_states=io["feats"], input_ids=io["ids"], document_ids=docs, ttt_steps=steps)
            hook.remove()
        else:  # its teacher-forced chain (step k reads step k-1's output) over the same input state
            got = [x[0] for x in model(input_ids=io["ids"], hidden_states=io["hidden"])[0]]
    err = max(float((g - w).abs().max()) for g, w in zip(got, io["logits"]))
    out[path] = dict(kind=kind, bad=bad, steps=len(got), err=err, missing=sorted(set(state) - set(ours)),
                     residual=getattr(config, "norm_before_residual", None))
print(json.dumps(out))
"""


def eagle3_ttt_logits(model: Eagle3Model, steps: int = 3) -> dict[str, torch.Tensor]:
    """Our logits for speculators' training-time-test layout: step s at position i reads the token
    s after i and step s-1's state there, attends the causal context and its own earlier steps."""
    g = torch.Generator().manual_seed(5)
    n, k = 10, len(model.cfg.target_layers) * model.cfg.target_hidden_size
    feats, ids = torch.randn(1, n, k, generator=g), torch.randint(3, VOCAB, (1, n), generator=g)
    pos, mask = torch.arange(n)[None], torch.ones(n, n, dtype=torch.bool).tril()[None]
    with torch.no_grad():
        hidden, ck, cv = model.context(ids, model.fuse(feats), pos)
        logits, ks, vs = [model.logits(hidden)], [], []
        for s in range(1, steps):
            tok = torch.cat([ids[:, s:], ids.new_zeros(1, s)], 1)
            chain_k, chain_v = (torch.stack(ks, 3), torch.stack(vs, 3)) if ks else (None, None)
            hidden, kj, vj = model.chain(tok, hidden, pos + s, ck, cv, mask, chain_k, chain_v)
            ks.append(kj)
            vs.append(vj)
            logits.append(model.logits(hidden))
    return {"feats": feats, "ids": ids, "logits": torch.cat(logits)}


def mtp_chain_logits(model, steps: int = 3) -> dict[str, torch.Tensor]:
    """Our block over speculators' teacher-forced MTP layout: fresh causal attention per step."""
    from draftsmith.drafters.mtp.model import ContextKV

    g = torch.Generator().manual_seed(6)
    n, h = 12, model.cfg.hidden_size
    hidden, ids = torch.randn(1, n, h, generator=g), torch.randint(3, VOCAB, (1, n), generator=g)
    valid = n - steps - 1
    mask = torch.ones(valid, valid, dtype=torch.bool).tril()[None]
    state, logits = hidden[:, :valid], []
    with torch.no_grad():
        for s in range(steps):
            raw = model.block(
                state, ids[:, s + 1 : s + 1 + valid], torch.arange(valid)[None], ContextKV(n), mask
            )
            step_logits, state = model.readout(raw)
            logits.append(step_logits)
    return {"hidden": hidden, "ids": ids, "logits": torch.cat(logits)}


@pytest.mark.skipif(
    not SPEC_PY.is_file(), reason="no .venv-speculators (setup.sh creates it): speculators 0.9.0 absent"
)
def test_speculators_own_eagle3_and_mtp_classes_compute_our_logits(tmp_path):
    target = tiny_target()
    target.model.save_pretrained(tmp_path / "verifier")
    v = verifier_of(target, str(tmp_path / "verifier"))
    cases = {"e3": make_eagle3(target, 48), "e3r": make_eagle3(target, norm_before_residual=True)}
    for name, model in cases.items():
        eagle3_export.write_speculators(model, tmp_path / name, v)
        save_file(eagle3_ttt_logits(model), str(tmp_path / name / "io.safetensors"))
    qwen, head = make_mtp_head("qwen3")
    qwen.model.save_pretrained(tmp_path / "qwen")
    mtp_dir = common_write(
        tmp_path / "mtp", *mtp_export.files(head, verifier_of(qwen, str(tmp_path / "qwen")))
    )
    save_file(mtp_chain_logits(head), str(mtp_dir / "io.safetensors"))
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    dirs = [str(tmp_path / n) for n in (*cases, "mtp")]
    run = subprocess.run(
        [str(SPEC_PY), "-c", SPECULATORS_EAGLE3_MTP_CHECK, *dirs],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    for d in dirs:
        r = got[d]
        assert r["bad"] == [] and r["steps"] == 3, r
        assert r["err"] < 1e-4, r  # speculators' own modules compute our logits at every chain step
    assert got[dirs[1]]["residual"] is True and got[dirs[0]]["residual"] is False
    assert set(got[dirs[0]]["missing"]) <= {"verifier_lm_head.weight", "verifier_norm.weight"}
    assert set(got[dirs[2]]["missing"]) <= {"embed_tokens.weight", "lm_head.weight"}


def common_write(out: Path, config: dict, weights: dict) -> Path:
    from draftsmith.export.common import write_dir

    return write_dir(out, config, weights)
