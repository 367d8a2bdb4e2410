"""Shared fixtures: tiny randomly initialised models of several architectures, and the real target."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

VOCAB = 96

ARCHS = {
    # model_type -> extra config; llama and qwen3 take the lean path, gemma3 the generic HF path
    "llama": dict(),
    "qwen3": dict(head_dim=16),
    "gemma3_text": dict(head_dim=16, sliding_window=8, query_pre_attn_scalar=16),
}


def tiny_model(arch: str = "llama", seed: int = 0, vocab: int = VOCAB, layers: int = 2, hidden: int = 64):
    torch.manual_seed(seed)
    cfg = AutoConfig.for_model(
        arch,
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        initializer_range=0.2,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        **ARCHS[arch],
    )
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    with torch.no_grad():  # sharpen the random logits so greedy text has structure (loops, repeats)
        model.get_output_embeddings().weight.mul_(1.0)
    model.requires_grad_(False)
    return model


@pytest.fixture(scope="session")
def smollm():
    """The real default target (SmolLM2-135M-Instruct), loaded once for the whole run."""
    from draftsmith.api import load_target

    return load_target()
