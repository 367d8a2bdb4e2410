"""A loaded target: the model, its tokenizer, and the runner the engine drives."""

from __future__ import annotations

import hashlib
import json
import logging

import torch

from draftsmith.engine.backends import make_runner
from draftsmith.engine.lean_llama import auto_fixed_rows
from draftsmith.engine.runner import ModelRunner
from draftsmith.engine.step_shapes import MIXED_ROWS, PAD_SLACK, check_fixed_rows
from draftsmith.engine.stop import StopRule
from draftsmith.errors import DraftsmithError
from draftsmith.models.loading import load_model_and_tokenizer


class Target:
    """The model whose output speculative decoding must reproduce exactly."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        name: str = "custom",
        backend: str = "auto",
        calibrate: bool = False,
        fixed_rows: int | str | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.source: str | None = None
        self.runner: ModelRunner = make_runner(model, backend)
        if calibrate:  # pick the fastest step shapes on this machine (cached on disk after the first run)
            self.runner.calibrate_cached()
        self.set_fixed_rows(fixed_rows)

    def set_fixed_rows(self, rows: int | str | None) -> None:
        """Fixed-shape (batch-invariant) steps: None picks them for this dtype and machine; "mixed"
        runs short steps as that shape and each longer one as its own, where the kernels give every
        shape of 2..PAD_SLACK rows the same bits (probed once, kept with the calibration; else the
        auto shape alone, with a warning)."""
        if rows is None or rows == MIXED_ROWS:
            auto = auto_fixed_rows(self.runner)  # 0 where free shapes are exact already: nothing to mix
            if rows == MIXED_ROWS and auto:
                if self.runner.set_mixed_rows(PAD_SLACK, least=auto):
                    return
                logging.getLogger("draftsmith").warning(
                    "mixed step shapes: this machine's kernels round some shape differently (or no step "
                    "table is calibrated); running every step as %d rows",
                    auto,
                )
            self.runner.set_fixed_rows(auto)
            return
        self.runner.set_fixed_rows(check_fixed_rows(rows))

    @classmethod
    def load(
        cls,
        source: str | None = None,
        dtype: str = "auto",
        device: str = "auto",
        backend: str = "auto",
        calibrate: bool = True,
        fixed_rows: int | str | None = None,
    ) -> Target:
        # only the lean runner has the fixed-shape steps that keep bf16 exact on CPU
        lean = backend != "hf"
        model, tok, name = load_model_and_tokenizer(source, dtype=dtype, device=device, cpu_bf16=lean)
        target = cls(model, tok, name, backend, calibrate, fixed_rows)
        target.source = source  # what the user pointed at (a GGUF target deploys as is)
        return target

    @property
    def device(self) -> torch.device:
        return self.runner.device

    @property
    def eos_ids(self) -> frozenset[int]:
        ids = set()
        for src in (getattr(self.model, "generation_config", None), self.model.config, self.tokenizer):
            eos = getattr(src, "eos_token_id", None)
            if eos is not None:
                ids.update(eos if isinstance(eos, (list, tuple)) else [eos])
        return frozenset(int(i) for i in ids)

    def vocab_fingerprint(self) -> str:
        """Identity of the token space: drafters and caches are only valid for the same one."""
        vocab = sorted(self.tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        return hashlib.sha1(json.dumps(vocab).encode()).hexdigest()[:16]

    def encode(self, text: str, chat: bool = True) -> list[int]:
        """Token ids for a user message; the chat template is applied when the model has one."""
        if not isinstance(text, str) or not text.strip():
            raise DraftsmithError("the prompt is empty")
        if chat and getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
            )
            if hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return list(ids)
        return self.tokenizer.encode(text)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def stop_rule(self, max_new_tokens: int, stop: tuple[str, ...] = ()) -> StopRule:
        return StopRule(max_new_tokens, self.eos_ids, tuple(stop), self.decode if stop else None)
