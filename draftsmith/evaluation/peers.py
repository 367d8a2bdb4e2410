"""Peers measured on the same prompts: Hugging Face transformers `generate`, plain and prompt lookup.

They run on their own, untouched copy of the model (the lean runner re-lays out the weights of the
model it drives), so the comparison is against stock transformers.
"""

from __future__ import annotations

import time

import torch

from draftsmith.engine.sampling import SamplingParams
from draftsmith.models.loading import load_model_and_tokenizer
from draftsmith.models.target import Target

PEERS = {"hf-plain": {}, "hf-prompt-lookup": {"prompt_lookup_num_tokens": 10}}


class HFPeer:
    """One transformers `generate` configuration; returns (new tokens, seconds)."""

    def __init__(self, name: str, model: torch.nn.Module, target: Target) -> None:
        self.name = name
        self.model = model
        self.extra = PEERS[name]
        self.eos = sorted(target.eos_ids)
        self.pad = target.tokenizer.pad_token_id
        if self.pad is None:
            self.pad = self.eos[0] if self.eos else 0

    @classmethod
    def load(cls, names: list[str], target: Target, source: str | None) -> dict[str, HFPeer]:
        dtype = str(next(target.model.parameters()).dtype).removeprefix("torch.")
        model, _, _ = load_model_and_tokenizer(source, dtype=dtype, device=str(target.device))
        return {name: cls(name, model, target) for name in names}

    @torch.inference_mode()
    def run(self, ids: list[int], max_new_tokens: int, params: SamplingParams) -> tuple[list[int], float]:
        x = torch.tensor([ids], device=self.model.device)
        sampling = {"do_sample": False}
        if not params.greedy:
            sampling = {
                "do_sample": True,
                "temperature": params.temperature,
                "top_p": params.top_p,
                "top_k": params.top_k or None,
            }
            if params.seed is not None:
                torch.manual_seed(params.seed)
        t0 = time.perf_counter()
        out = self.model.generate(
            x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=max_new_tokens,
            eos_token_id=self.eos,
            pad_token_id=self.pad,
            **sampling,
            **self.extra,
        )
        seconds = time.perf_counter() - t0
        new = out[0, len(ids) :].tolist()
        cut = next((i for i, t in enumerate(new) if t in self.eos), len(new))
        return new[:cut], seconds
