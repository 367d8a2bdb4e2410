"""MTP on tiny models: lossless decoding, the drafts equal the training path, training through the
generic trainer (resume, save, load), and the loader of MTP modules shipped inside a checkpoint."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch
from conftest import VOCAB, tiny_model, tiny_target
from safetensors.torch import load_file, save_file

from draftsmith.drafters.mtp.checkpoint import load_mtp, ready_for, save_mtp
from draftsmith.drafters.mtp.drafter import MTPDrafter
from draftsmith.drafters.mtp.recipe import MTPOptions, MTPRecipe, collate
from draftsmith.drafters.mtp.training import chain_loss, unrolled_logits
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.runner import FINAL
from draftsmith.engine.sampling import SamplingParams
from draftsmith.errors import DraftsmithError
from draftsmith.models.target import Target
from draftsmith.training.cache import TargetCache, build_cache, target_sequence
from draftsmith.training.train import TrainConfig, train

PROMPT = [5, 9, 14, 3, 22, 9, 14, 30, 41]


def make_mtp(target, seed: int = 0, **opts):
    torch.manual_seed(seed)
    return ready_for(MTPRecipe().build(target, MTPOptions(**opts), [1], None), target)


def plain(target, ids, n=40):
    return speculative_generate(target.runner, PlainDrafter(), ids, StopRule(n)).tokens


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_random_mtp_decodes_losslessly_greedy_and_sampled(arch):
    target = tiny_target(arch)
    drafter = MTPDrafter.build(target, TrainedDecodeOptions(drafter=make_mtp(target)))
    res = speculative_generate(target.runner, drafter, PROMPT, StopRule(40), k=4, adaptive=False)
    assert res.tokens == plain(target, PROMPT)
    assert res.stats.drafted > 0
    params = SamplingParams(temperature=0.9, top_p=0.95, seed=3)
    a = speculative_generate(target.runner, drafter, PROMPT, StopRule(30), params, k=3, adaptive=False)
    b = speculative_generate(target.runner, drafter, PROMPT, StopRule(30), params, k=3, adaptive=False)
    assert a.tokens == b.tokens and len(a.tokens) == 30 and all(0 <= t < VOCAB for t in a.tokens)
    one = speculative_generate(target.runner, drafter, [7], StopRule(12), k=3, adaptive=False)
    assert one.tokens == plain(target, [7], 12)  # a one-token prompt has no target state yet


def fitted_mtp(target, steps: int = 60):
    """A head overfitted to the target's greedy continuation of PROMPT: its drafts get accepted."""
    ids = PROMPT + plain(target, PROMPT, 40)
    batch = collate([target_sequence(target, ids, [True] * len(ids), [1])], target.device)
    model = make_mtp(target, init="target").train().requires_grad_(True)
    MTPRecipe().attach(model, target)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(steps):
        loss, _ = chain_loss(model, batch, depth=3, chain_weight=1.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return ready_for(model, target)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_accepted_drafts_stay_lossless(arch):
    """Whole and partial acceptances (the context cache appends 1..k+1 pairs a round)."""
    target = tiny_target(arch)
    drafter = MTPDrafter.build(target, TrainedDecodeOptions(drafter=fitted_mtp(target)))
    res = speculative_generate(target.runner, drafter, PROMPT, StopRule(40), k=4, adaptive=False)
    assert res.tokens == plain(target, PROMPT)
    assert res.stats.accepted >= res.stats.drafted // 2 > 0
    other = PROMPT[:6] + [60, 61]
    res = speculative_generate(target.runner, drafter, other, StopRule(40), k=4, adaptive=False)
    assert res.tokens == plain(target, other)
    params = SamplingParams(temperature=0.5, seed=1)
    res = speculative_generate(target.runner, drafter, PROMPT, StopRule(40), params, k=4, adaptive=False)
    assert len(res.tokens) == 40 and res.stats.accepted > 0


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_inference_drafts_equal_the_training_path(arch):
    """Every round's chain is what the training-time unroll computes on the same tokens: its first
    draft from the committed context, each later one from the drafts before it."""
    target = tiny_target(arch)
    model = make_mtp(target, seed=1)
    rounds = []

    class Recording(MTPDrafter):
        def propose(self, tokens, k, params, generator):
            draft = super().propose(tokens, k, params, generator)
            first = self.model.readout(self.last)[0][0, -1].clone()
            rounds.append((tokens.tolist(), draft.tokens.tolist(), first))
            return draft

    drafter = Recording.build(target, TrainedDecodeOptions(drafter=model))
    speculative_generate(target.runner, drafter, PROMPT, StopRule(24), k=4, adaptive=False)
    assert len(rounds) > 3
    for tokens, drafts, first in rounds[:4]:
        n = len(tokens)
        seq = target_sequence(target, tokens + drafts, [True] * (n + len(drafts)), [1])
        with torch.no_grad():
            steps = unrolled_logits(model, seq.ids[None], seq.final[None], len(drafts), torch.tensor([n - 2]))
        torch.testing.assert_close(steps[0][0, n - 2], first, atol=1e-4, rtol=1e-4)
        trained = [int(steps[0][0, n - 2].argmax())] + [int(x[0, 0].argmax()) for x in steps[1:]]
        assert trained == drafts


def test_training_steps_lower_the_loss():
    target = tiny_target()
    model = make_mtp(target)
    model.train().requires_grad_(True)
    MTPRecipe().attach(model, target)
    g = torch.Generator().manual_seed(0)
    seqs = [
        target_sequence(target, ids, [False] * 3 + [True] * 17, [1])
        for ids in torch.randint(3, VOCAB, (2, 20), generator=g).tolist()
    ]
    batch = collate(seqs, target.device)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    first = None
    for _ in range(12):
        loss, metrics = chain_loss(model, batch, depth=2, label="soft")
        first = first if first is not None else float(loss.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(loss.detach()) < first and {"ce1", "ce2", "acc1", "tau_est"} <= set(metrics)


def make_answers(tmp_path, n=8):
    g = torch.Generator().manual_seed(1)
    rows = []
    for i in range(n):
        p, a = torch.randint(3, VOCAB, (6,), generator=g), torch.randint(3, VOCAB, (20,), generator=g)
        rows.append(
            {
                "id": f"p{i}",
                "prompt": " ".join(f"t{t}" for t in p.tolist()),
                "answer": " ".join(f"t{t}" for t in a.tolist()),
            }
        )
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_trained_head_scores_saves_and_decodes(tmp_path):
    """(Exact resume: test_training_pipeline.py, for every trainable method.)"""
    target = tiny_target()
    build_cache(target, make_answers(tmp_path), tmp_path / "cache", [1, 2], progress=False)
    cache = TargetCache(tmp_path / "cache", target)
    cfg = TrainConfig.from_flat(
        method="mtp",
        steps=6,
        batch=2,
        unroll=2,
        draft_vocab=48,
        eval_every=3,
        save_every=3,
        held_out=2,
        lr=3e-3,
    )
    train(target, cache, cfg, tmp_path / "straight", progress=False)
    log = [json.loads(x) for x in (tmp_path / "straight" / "train_log.jsonl").read_text().splitlines()]
    assert log[-1]["loss"] < log[0]["loss"]
    for key in ("tau", "tau_k3", "tau_greedy", "tau_greedy_k3"):
        assert 1.0 <= log[2][f"held_out_{key}"] <= 8.0
    model = load_mtp(tmp_path / "straight", target)
    assert model.d2t.shape[0] == 48
    drafter = build_drafter("mtp", target, drafter=str(tmp_path / "straight"))
    res = speculative_generate(target.runner, drafter, PROMPT, StopRule(30), k=3, adaptive=False)
    assert res.tokens == plain(target, PROMPT, 30)


def test_held_out_metrics_are_deterministic_and_see_the_whole_chain(tmp_path):
    target = tiny_target()
    build_cache(target, make_answers(tmp_path, n=3), tmp_path / "cache", [1], progress=False)
    seqs = list(TargetCache(tmp_path / "cache", target))
    model = make_mtp(target)
    MTPRecipe().attach(model, target)
    first = MTPRecipe().evaluate(model, seqs, MTPOptions())
    assert first == MTPRecipe().evaluate(model, seqs, MTPOptions())
    assert set(first) == {"tau", "tau_k3", "tau_greedy", "tau_greedy_k3"}
    assert all(math.isfinite(v) and v >= 1.0 for v in first.values())


def test_bad_checkpoints_and_options_are_clear_errors(tmp_path):
    target = tiny_target()
    save_mtp(make_mtp(target), tmp_path / "d")
    other = tiny_target("qwen3", seed=3)
    with pytest.raises(DraftsmithError, match="was trained for target"):
        load_mtp(tmp_path / "d", other)
    with pytest.raises(DraftsmithError, match="not found"):
        MTPDrafter.build(target, TrainedDecodeOptions(drafter=str(tmp_path / "missing")))
    with pytest.raises(DraftsmithError, match="ships none"):
        MTPDrafter.build(target)  # no --drafter and a target without shipped modules
    state = load_file(str(tmp_path / "d" / "model.safetensors"))
    del state["eh_proj.weight"]
    save_file(state, str(tmp_path / "d" / "model.safetensors"))
    with pytest.raises(DraftsmithError, match="does not match"):
        load_mtp(tmp_path / "d", target)
    with pytest.raises(DraftsmithError, match="unroll"):
        MTPOptions(unroll=0)


# --- MTP modules shipped inside a checkpoint -------------------------------------------------


def save_with_tokenizer(model, directory, extra: dict[str, torch.Tensor], config_extra: dict):
    """A tiny HF directory whose safetensors index also lists `extra` tensors in a second shard,
    as real checkpoints ship their MTP layers; config.json gains `config_extra`."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    model.save_pretrained(directory)
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="t2", unk_token="t0").save_pretrained(directory)
    main = directory / "model-00001-of-00002.safetensors"
    (directory / "model.safetensors").rename(main)
    save_file(
        {k: v.contiguous() for k, v in extra.items()}, str(directory / "model-00002-of-00002.safetensors")
    )
    weight_map = dict.fromkeys(load_file(str(main)), main.name)
    weight_map.update(dict.fromkeys(extra, "model-00002-of-00002.safetensors"))
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map})
    )
    cfg = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**cfg, **config_extra}))


def tiny_deepseek():
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    cfg = AutoConfig.for_model(
        "deepseek_v3",
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_group=1,
        topk_group=1,
        first_k_dense_replace=1,
        kv_lora_rank=16,
        q_lora_rank=None,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=16,
        max_position_embeddings=256,
        num_nextn_predict_layers=1,
        tie_word_embeddings=False,
        initializer_range=0.2,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    return AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()


class Module(torch.nn.Module):
    """An MTP module built independently of draftsmith's, as the reference for the shipped one."""

    def __init__(self, model, names: dict[str, str], order: str = "eh") -> None:
        super().__init__()
        cfg, h = model.config, model.config.hidden_size
        norm = type(model.model.norm)
        self.names, self.order = names, order
        eps = cfg.rms_norm_eps
        self.enorm, self.hnorm, self.norm = norm(h, eps=eps), norm(h, eps=eps), norm(h, eps=eps)
        self.proj = torch.nn.Linear(2 * h, h, bias=False)
        layer_cfg = copy.deepcopy(cfg)
        if getattr(layer_cfg, "layer_types", None):  # the module's layer is a full-attention one
            layer_cfg.layer_types = [*layer_cfg.layer_types, "full_attention"]
        self.layer = type(model.model.layers[0])(layer_cfg, cfg.num_hidden_layers)
        g = torch.Generator().manual_seed(5)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(
                    torch.randn(p.shape, generator=g) * (0.3 if p.dim() == 1 else p.shape[-1] ** -0.5)
                    + (p.dim() == 1)
                )

    def tensors(self, prefix: str) -> dict[str, torch.Tensor]:
        out = {}
        for name, t in self.state_dict().items():
            head, _, rest = name.partition(".")
            out[prefix + self.names[head] + rest] = t
        return out

    @torch.no_grad()
    def first_draft_logits(self, model, ids: torch.Tensor, final: torch.Tensor, head: torch.Tensor):
        """Logits of the draft after ids (final: the target's final-norm states of ids[:-1])."""
        n = final.shape[0]
        e = model.model.embed_tokens(ids[1:])[None]
        parts = [self.enorm(e), self.hnorm(final[None])]
        x = self.proj(torch.cat(parts if self.order == "eh" else parts[::-1], -1))
        pos = torch.arange(1, n + 1)[None]
        mask = torch.ones(n, n, dtype=torch.bool).tril()[None, None]
        model.config._attn_implementation = "sdpa"
        out = self.layer(
            x, attention_mask=mask, position_ids=pos, position_embeddings=model.model.rotary_emb(x, pos)
        )
        out = out[0] if isinstance(out, tuple) else out
        return self.norm(out)[0, -1] @ head.t()


def check_shipped(directory, module: Module, source: str, head_name: str | None):
    target = Target.load(str(directory), dtype="float32", device="cpu", calibrate=False, fixed_rows=0)
    drafter = build_drafter("mtp", target)  # no --drafter: the module the checkpoint ships
    assert drafter.model.cfg.source == source
    res = speculative_generate(target.runner, drafter, PROMPT, StopRule(30), k=3, adaptive=False)
    assert res.tokens == plain(target, PROMPT, 30)
    ids = torch.tensor(PROMPT)
    target.runner.reset(64)
    pre = target.runner.forward(ids[:-1], n_logits=0, hidden=(FINAL,))
    drafter.start(ids, pre.hidden, 64)
    draft = drafter.propose(ids, 3, SamplingParams(), None)
    head = (
        target.model.lm_head.weight
        if head_name is None
        else load_file(str(directory / "model-00002-of-00002.safetensors"))[head_name]
    )
    ref = module.first_draft_logits(target.model, ids, pre.hidden[FINAL], head)
    torch.testing.assert_close(drafter.model.readout(drafter.last)[0][0, -1], ref, atol=1e-4, rtol=1e-4)
    assert int(draft.tokens[0]) == int(ref.argmax())


def test_shipped_deepseek_v3_module_is_found_and_used(tmp_path):
    """DeepSeek-V3 layout: num_nextn_predict_layers and model.layers.{L}.* (an MLA + MoE layer)."""
    model = tiny_deepseek()
    names = {
        "enorm": "enorm.",
        "hnorm": "hnorm.",
        "norm": "shared_head.norm.",
        "proj": "eh_proj.",
        "layer": "",
    }
    module = Module(model, names)
    extra = module.tensors("model.layers.2.")
    extra["model.layers.2.shared_head.head.weight"] = torch.randn(VOCAB, 64) * 0.3
    extra["model.layers.2.embed_tokens.weight"] = model.model.embed_tokens.weight.clone()
    save_with_tokenizer(model, tmp_path / "ds", extra, {})
    check_shipped(tmp_path / "ds", module, "deepseek", "model.layers.2.shared_head.head.weight")


def test_shipped_qwen3_next_style_module_is_found_and_used(tmp_path):
    """Qwen3-Next layout (mtp.fc, mtp.pre_fc_norm_*, mtp.layers.0.*, mtp.norm) on a Qwen3 body."""
    model = tiny_model("qwen3", layers=2)
    names = {
        "enorm": "pre_fc_norm_embedding.",
        "hnorm": "pre_fc_norm_hidden.",
        "norm": "norm.",
        "proj": "fc.",
        "layer": "layers.0.",
    }
    module = Module(model, names)
    save_with_tokenizer(model, tmp_path / "q", module.tensors("mtp."), {"num_nextn_predict_layers": 1})
    check_shipped(tmp_path / "q", module, "mtp", None)


def test_shipped_module_errors(tmp_path):
    model = tiny_model("llama", layers=2)
    save_with_tokenizer(
        model, tmp_path / "claims", {"unrelated.weight": torch.zeros(2)}, {"num_nextn_predict_layers": 1}
    )
    target = Target.load(
        str(tmp_path / "claims"), dtype="float32", device="cpu", calibrate=False, fixed_rows=0
    )
    with pytest.raises(DraftsmithError, match="ships 1 MTP module"):
        build_drafter("mtp", target)
    names = {
        "enorm": "enorm.",
        "hnorm": "hnorm.",
        "norm": "shared_head.norm.",
        "proj": "eh_proj.",
        "layer": "",
    }
    extra = Module(model, names).tensors("model.layers.2.")
    del extra["model.layers.2.eh_proj.weight"]
    save_with_tokenizer(model, tmp_path / "partial", extra, {"num_nextn_predict_layers": 1})
    target = Target.load(
        str(tmp_path / "partial"), dtype="float32", device="cpu", calibrate=False, fixed_rows=0
    )
    with pytest.raises(DraftsmithError, match="does not fit"):
        build_drafter("mtp", target)
    save_with_tokenizer(model, tmp_path / "none", {"unrelated.weight": torch.zeros(2)}, {})
    target = Target.load(str(tmp_path / "none"), dtype="float32", device="cpu", calibrate=False, fixed_rows=0)
    with pytest.raises(DraftsmithError, match="ships none"):
        build_drafter("mtp", target)
