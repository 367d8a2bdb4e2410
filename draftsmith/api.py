"""The library API, as short as the CLI: load a target, pick a method, generate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.engine.drafter import Drafter
from draftsmith.engine.sampling import SamplingParams
from draftsmith.engine.stats import GenerationStats
from draftsmith.models.target import Target


@dataclass
class Completion:
    text: str
    tokens: list[int]
    finish_reason: str
    stats: GenerationStats
    method: str


class TextStream:
    """Turns committed token chunks into text deltas, holding back half-decoded characters."""

    def __init__(self, target: Target, on_text: Callable[[str], None]) -> None:
        self.target, self.on_text = target, on_text
        self.tokens: list[int] = []
        self.sent = 0

    def __call__(self, new_tokens: list[int]) -> None:
        self.tokens.extend(new_tokens)
        text = self.target.decode(self.tokens)
        if text.endswith("\ufffd"):
            return
        if len(text) > self.sent:
            self.on_text(text[self.sent :])
            self.sent = len(text)


def load_target(
    source: str | None = None, dtype: str = "auto", device: str = "auto", fixed_rows: int | str | None = None
) -> Target:
    """The default target (SmolLM2-135M-Instruct) or any HF causal LM: dir, hub id or .gguf file.

    fixed_rows: None picks batch-invariant step shapes where the dtype needs them (bf16/fp16 on
    CPU, Llama-family models), 0 turns them off, 2..16 runs every step of up to N tokens as one
    N-row shape (drafts then hold at most N - 1 tokens), "mixed" runs short steps as the auto shape
    and longer ones as their own where every shape gives the same bits (drafts of up to 15 tokens).
    """
    return Target.load(source, dtype=dtype, device=device, fixed_rows=fixed_rows)


def generate(
    target: Target,
    prompt: str | list[int],
    method: str | Drafter = "ngram",
    *,
    max_new_tokens: int = 256,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = None,
    stop: tuple[str, ...] = (),
    chat: bool = True,
    k: int | None = None,
    on_text: Callable[[str], None] | None = None,
    **drafter_options,
) -> Completion:
    """Decode `prompt` losslessly with `method` (a registry name or a built Drafter).

    drafter_options: the method's decoding options by name (the fields of its Drafter's `options`
    dataclass, e.g. drafter=DIR for dspark, ngram_max=4 for ngram); another method's are ignored."""
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    drafter = method if isinstance(method, Drafter) else build_drafter(method, target, k=k, **drafter_options)
    ids = target.encode(prompt, chat=chat) if isinstance(prompt, str) else list(prompt)
    stream = TextStream(target, on_text) if on_text else None
    result = speculative_generate(
        target.runner,
        drafter,
        ids,
        target.stop_rule(max_new_tokens, tuple(stop)),
        params,
        k=k,
        on_tokens=stream,
    )
    return Completion(
        target.decode(result.tokens), result.tokens, result.finish_reason, result.stats, drafter.name
    )
