"""Pick the fastest runner that is exact for a model: the lean Llama-family path, else HF's forward."""

from __future__ import annotations

import torch

from draftsmith.engine import lean_llama
from draftsmith.engine.hf_runner import HFRunner
from draftsmith.engine.runner import ModelRunner

BACKENDS = {"lean": lean_llama.LeanLlamaRunner, "hf": HFRunner}


def make_runner(model: torch.nn.Module, backend: str = "auto") -> ModelRunner:
    """backend: "auto" (lean when supported), "lean" or "hf"."""
    if backend == "auto":
        backend = "lean" if lean_llama.supports(model) else "hf"
    if backend == "lean" and not lean_llama.supports(model):
        raise ValueError(f"the lean backend does not support model_type {model.config.model_type!r}")
    return BACKENDS[backend](model)
