"""The real default target (SmolLM2-135M-Instruct): losslessness, API, and bad-input handling."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_model

from draftsmith import DraftsmithError, build_drafter, generate
from draftsmith.models.loading import load_model_and_tokenizer

PROMPTS = [
    "Write a python function that returns the n-th Fibonacci number.",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "Repeat this list exactly: apples, pears, plums, apples, pears, plums.",
]


_HF_GREEDY: dict[tuple, list[int]] = {}


def hf_greedy(target, ids, n):
    """transformers' greedy continuation (computed once per prompt: every method compares to it)."""
    key = (target.name, tuple(ids), n)
    if key not in _HF_GREEDY:
        _HF_GREEDY[key] = _hf_greedy(target, ids, n)
    return _HF_GREEDY[key]


def _hf_greedy(target, ids, n):
    with torch.inference_mode():
        out = target.model.generate(
            torch.tensor([ids]),
            max_new_tokens=n,
            do_sample=False,
            eos_token_id=sorted(target.eos_ids),
            pad_token_id=0,
        )
    new = out[0, len(ids) :].tolist()
    return new[: next((i for i, t in enumerate(new) if t in target.eos_ids), len(new))]


@pytest.mark.parametrize("method", ["plain", "ngram"])
def test_greedy_matches_transformers_generate(smollm, method):
    for text in PROMPTS:
        ids = smollm.encode(text)
        out = generate(smollm, ids, method, max_new_tokens=48)
        assert out.tokens == hf_greedy(smollm, ids, 48), (method, text)


def test_sampling_is_reproducible_with_a_seed_and_uses_stop_strings(smollm):
    a = generate(smollm, PROMPTS[0], "ngram", max_new_tokens=24, temperature=0.8, top_p=0.9, seed=7)
    b = generate(smollm, PROMPTS[0], "ngram", max_new_tokens=24, temperature=0.8, top_p=0.9, seed=7)
    assert a.tokens == b.tokens and a.text
    plain = generate(smollm, PROMPTS[0], "plain", max_new_tokens=40)
    stop = plain.text[10:14]
    cut = generate(smollm, PROMPTS[0], "ngram", max_new_tokens=40, stop=(stop,))
    assert cut.finish_reason == "stop" and stop in cut.text
    assert plain.text.startswith(cut.text)


def test_streaming_yields_the_same_text(smollm):
    pieces: list[str] = []
    out = generate(smollm, PROMPTS[2], "ngram", max_new_tokens=32, on_text=pieces.append)
    assert "".join(pieces) == out.text


def test_prompt_longer_than_context_is_a_clear_error(smollm):
    with pytest.raises(DraftsmithError, match="context"):
        generate(smollm, [5] * 9000, "plain", max_new_tokens=4)


def _save_tiny(tmp_path, tokenizer, vocab):
    model = tiny_model("llama", vocab=vocab, layers=1, hidden=32)
    model.config.max_position_embeddings = 8192
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    return tmp_path


def test_draft_model_with_same_tokenizer_is_lossless(smollm, tmp_path):
    path = _save_tiny(tmp_path, smollm.tokenizer, 49152)
    drafter = build_drafter("draft-model", smollm, draft_model=str(path), k=3)
    ids = smollm.encode(PROMPTS[1])
    assert generate(smollm, ids, drafter, max_new_tokens=24).tokens == hf_greedy(smollm, ids, 24)


def test_draft_model_with_other_tokenizer_is_refused(smollm, tmp_path):
    tok = load_model_and_tokenizer(None)[1]
    tok.add_tokens(["<extra_token_for_test>"])
    path = _save_tiny(tmp_path, tok, 49153)
    with pytest.raises(DraftsmithError, match="tokenizer"):
        build_drafter("draft-model", smollm, draft_model=str(path))


def test_missing_and_corrupt_models_are_clear_errors(tmp_path, smollm):
    with pytest.raises(DraftsmithError, match="not found"):
        load_model_and_tokenizer(str(tmp_path / "nope"))
    with pytest.raises(DraftsmithError, match="not found"):
        load_model_and_tokenizer(str(tmp_path / "nope.gguf"))
    with pytest.raises(DraftsmithError, match="not a model directory"):
        load_model_and_tokenizer(str(tmp_path))
    bad = _save_tiny(tmp_path / "bad", smollm.tokenizer, 49152)
    (bad / "model.safetensors").write_bytes(b"this is not a safetensors file")
    with pytest.raises(DraftsmithError, match="could not load"):
        load_model_and_tokenizer(str(bad))
    with pytest.raises(DraftsmithError, match="draft-model"):
        build_drafter("draft-model", smollm)
    with pytest.raises(DraftsmithError, match="unknown method"):
        build_drafter("eagle9", smollm)


@pytest.mark.parametrize("method", ["dflash", "dspark", "hybrid", "eagle3", "mtp", "medusa"])
def test_shipped_drafters_are_lossless_on_the_default_target(smollm, method):
    drafter = build_drafter(method, smollm)  # no --drafter: the one shipped in the package
    # the hybrid also on the repeating list, where its lookup drafts
    for text in PROMPTS if method == "hybrid" else PROMPTS[:2]:
        ids = smollm.encode(text)
        out = generate(smollm, ids, drafter, max_new_tokens=40)
        assert out.tokens == hf_greedy(smollm, ids, 40), (method, text)
        assert out.stats.drafted > 0
    sampled = generate(smollm, PROMPTS[0], drafter, max_new_tokens=16, temperature=0.7, seed=3)
    assert sampled.stats.new_tokens > 0


def test_bf16_fixed_rows_make_dspark_reproduce_plain_decoding():
    """bf16 rounds differently per step shape; fixed-shape steps make speculation bit-exact again."""
    from draftsmith.api import load_target

    target = load_target(dtype="bfloat16", device="cpu")  # auto: fixed-shape steps for bf16 on CPU
    assert target.runner.fixed_rows >= 2
    drafter = build_drafter("dspark", target)
    for text in PROMPTS[:2]:
        ids = target.encode(text)
        plain = generate(target, ids, "plain", max_new_tokens=64)
        spec = generate(target, ids, drafter, max_new_tokens=64)
        assert spec.tokens == plain.tokens, text
        assert spec.stats.accepted > 0 and len(spec.stats.drafted_at) <= target.runner.fixed_rows - 1


def test_auto_dtype_on_cpu_is_bf16_only_where_native_and_exact(monkeypatch):
    """bf16 by default only where the CPU has native bf16 that oneDNN packs, and for models the lean
    runner runs (its fixed-shape steps keep bf16 speculation exact); fp32 otherwise."""
    from transformers import GPT2Config, LlamaConfig

    from draftsmith.engine import packing
    from draftsmith.models import loading

    llama, gpt2 = LlamaConfig(), GPT2Config()
    monkeypatch.setattr(loading, "cpu_has_bf16", lambda: True)
    monkeypatch.setattr(packing, "packable_dtypes", lambda: (torch.float32, torch.bfloat16))
    assert loading.auto_cpu_dtype(llama) == torch.bfloat16
    assert loading.auto_cpu_dtype(gpt2) == torch.float32  # the HF runner has no fixed-shape steps
    monkeypatch.setenv("DRAFTSMITH_PACKED", "0")
    assert loading.auto_cpu_dtype(llama) == torch.float32  # unpacked bf16 is slower than fp32
    monkeypatch.delenv("DRAFTSMITH_PACKED")
    monkeypatch.setattr(packing, "packable_dtypes", lambda: (torch.float32,))
    assert loading.auto_cpu_dtype(llama) == torch.float32
    monkeypatch.setattr(packing, "packable_dtypes", lambda: (torch.float32, torch.bfloat16))
    monkeypatch.setattr(loading, "cpu_has_bf16", lambda: False)
    assert loading.auto_cpu_dtype(llama) == torch.float32


def test_the_default_target_loads_in_the_cpu_default_dtype():
    from draftsmith.api import load_target
    from draftsmith.models.loading import auto_cpu_dtype

    target = load_target(device="cpu")
    assert target.model.dtype == auto_cpu_dtype(target.model.config)
    if target.model.dtype == torch.bfloat16:  # exact speculation needs the fixed-shape steps
        assert target.runner.fixed_rows >= 2


def test_fixed_rows_need_the_lean_runner():
    from conftest import IdTokenizer

    from draftsmith.models.target import Target

    with pytest.raises(DraftsmithError, match="lean runner"):
        Target(tiny_model("gemma3_text"), IdTokenizer(), fixed_rows=4)


@pytest.mark.parametrize("method", ["eagle3", "mtp", "distilled", "medusa"])
def test_methods_trained_here_are_lossless_on_the_default_target(smollm, method, tmp_path):
    """Each recipe's freshly built drafter (as `draftsmith train` starts it), saved and loaded back the
    way --drafter loads it, decodes the default target exactly as transformers' greedy generate."""
    import dataclasses

    from draftsmith.drafters.dflash.config import default_target_layers
    from draftsmith.drafters.registry import recipe_for
    from draftsmith.training.recipe import make_options

    recipe = recipe_for(method)
    full_vocab = (
        {"draft_vocab": 0} if "draft_vocab" in {f.name for f in dataclasses.fields(recipe.options)} else {}
    )
    layers = default_target_layers(smollm.model.config.num_hidden_layers)
    torch.manual_seed(0)
    model = recipe.build(smollm, make_options(recipe, full_vocab), layers, None)
    recipe.save(model, tmp_path / method, None)
    drafter = build_drafter(method, smollm, drafter=str(tmp_path / method))
    ids = smollm.encode(PROMPTS[0])
    out = generate(smollm, ids, drafter, max_new_tokens=32)
    assert out.tokens == hf_greedy(smollm, ids, 32), method
    assert out.stats.drafted > 0


@pytest.mark.parametrize("method", ["dflash", "dspark"])
def test_the_walk_metric_counts_the_rounds_decoding_takes(smollm, method):
    """The held-out walk (every answer position teacher-forced, then decoding's jumps) predicts real
    speculative decoding's rounds: the shipped drafter, 3 drafts a round, no shortening."""
    from draftsmith.drafters.registry import recipe_for
    from draftsmith.engine.decode import StopRule, speculative_generate
    from draftsmith.training.cache import target_sequence

    recipe = recipe_for(method)
    model = recipe.load(smollm)
    drafter = build_drafter(method, smollm)
    for text in PROMPTS[:2]:
        ids = smollm.encode(text)
        answer = hf_greedy(smollm, ids, 40)
        real = speculative_generate(smollm.runner, drafter.fork(), ids, StopRule(40), k=3, adaptive=False)
        assert real.tokens == answer
        mask = [False] * len(ids) + [True] * len(answer)
        seq = target_sequence(smollm, ids + answer, mask, model.cfg.target_layers)
        taus = recipe.walk(model, [seq], recipe.score_options(model, 8))
        # the prefill writes the first token in a round of its own, which the walk does not count; one
        # target pass over the whole answer and decoding's step-by-step passes differ in the last bits
        # (fp32), which can flip a near-tie draft: at most one round apart on 40 tokens
        walk_rounds = (len(answer) - 1) / taus["tau_walk_k3"]
        assert abs(walk_rounds - (real.stats.rounds - 1)) <= 1 + 1e-6, text
        assert taus["tau_walk"] >= taus["tau_walk_k3"]


def test_the_converted_target_directory_is_the_standard_layout(smollm):
    """What draftsmith writes when it converts the GGUF is transformers' own layout (`architectures`,
    the tied head stored as the embedding, as vLLM and llama.cpp's converter read it): reloaded by
    transformers alone it gives the same logits as the target draftsmith decodes with."""
    import json

    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    from draftsmith.models.loading import _gguf_cache_dir, default_target_file

    cache = _gguf_cache_dir(default_target_file())
    config = json.loads((cache / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["tie_word_embeddings"]
    with safe_open(str(cache / "model.safetensors"), "pt") as f:
        assert "model.embed_tokens.weight" in set(f.keys())
    again = AutoModelForCausalLM.from_pretrained(cache, dtype=torch.float32).eval()
    ids = torch.tensor([smollm.encode(PROMPTS[0])])
    with torch.no_grad():
        torch.testing.assert_close(again(ids).logits, smollm.model(ids).logits)
