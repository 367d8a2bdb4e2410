"""An external draft model: a small causal LM with the target's tokenizer drafts autoregressively.

It keeps its own rollback-by-length KV cache, so each round only feeds the tokens it has not seen.
At temperature > 0 it samples from its own distribution under the same sampling settings and
hands that distribution to the verifier, which is what keeps speculative sampling exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from draftsmith.engine.backends import make_runner
from draftsmith.engine.drafter import Draft, Drafter
from draftsmith.engine.sampling import SamplingParams, sample, target_probs
from draftsmith.errors import DraftsmithError
from draftsmith.models.loading import load_model_and_tokenizer


def check_same_tokenizer(target_tok, draft_tok, draft_name: str) -> None:
    """Refuse a drafter whose token ids mean something else: its guesses would be garbage."""
    t_vocab, d_vocab = target_tok.get_vocab(), draft_tok.get_vocab()
    if t_vocab != d_vocab:
        only_t = len(set(t_vocab.items()) - set(d_vocab.items()))
        raise DraftsmithError(
            f"draft model {draft_name!r} does not share the target's tokenizer "
            f"({len(d_vocab)} vs {len(t_vocab)} tokens, {only_t} target tokens differ); "
            "pick a draft model from the same family (e.g. Qwen3-0.6B for Qwen3-8B)"
        )


@dataclass(frozen=True)
class DraftModelDecodeOptions:
    """The draft-model method's decoding options (`DraftModelDrafter.options`)."""

    draft_model: str | torch.nn.Module | None = field(
        default=None,
        metadata={"help": "a small LM with the same tokenizer: model dir, hub id or .gguf file"},
    )  # from Python also a loaded model

    def __post_init__(self) -> None:
        if not (self.draft_model is None or isinstance(self.draft_model, str | torch.nn.Module)):
            raise DraftsmithError(
                f"draft_model must be a name, a path or a loaded model, got {type(self.draft_model).__name__}"
            )


class DraftModelDrafter(Drafter):
    name = "draft-model"
    description = "a small causal LM with the same tokenizer drafts token by token"
    options = DraftModelDecodeOptions

    def __init__(self, model: torch.nn.Module, target_vocab: int, k: int = 4, backend: str = "auto") -> None:
        self.runner = make_runner(model, backend)
        self.target_vocab = target_vocab
        self.default_k = k

    @classmethod
    def build(
        cls, target, options: DraftModelDecodeOptions | None = None, k: int | None = None
    ) -> DraftModelDrafter:
        draft_model = (options or DraftModelDecodeOptions()).draft_model
        if not draft_model:
            raise DraftsmithError("method 'draft-model' needs --draft-model PATH|HF_ID|FILE.gguf")
        if isinstance(draft_model, torch.nn.Module):
            model, name = draft_model, "<module>"
        else:
            dtype = str(next(target.model.parameters()).dtype).removeprefix("torch.")
            model, tok, name = load_model_and_tokenizer(draft_model, dtype=dtype, device=str(target.device))
            check_same_tokenizer(target.tokenizer, tok, name)
        return cls(model, target.runner.vocab_size, k=4 if k is None else k)

    def fork(self) -> DraftModelDrafter:
        other = super().fork()
        other.runner = self.runner.fork()  # same draft weights, a KV cache per request
        return other

    def start(self, prompt: torch.Tensor, hidden, max_len: int) -> None:
        self.runner.reset(min(max_len, self.runner.max_context))

    def _dist(self, logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
        v = self.target_vocab
        if logits.shape[-1] < v:  # tokens the draft cannot emit get q = 0
            logits = torch.nn.functional.pad(logits, (0, v - logits.shape[-1]), value=float("-inf"))
        return target_probs(logits[..., :v], params)

    def propose(self, tokens: torch.Tensor, k: int, params: SamplingParams, generator) -> Draft:
        n = tokens.shape[0]
        k = min(k, self.runner.max_context - n)
        if k <= 0:
            return Draft.empty(tokens.device)
        logits = self.runner.forward(tokens[self.runner.length :], n_logits=1).logits[-1]
        out, dists = [], []
        for i in range(k):
            if params.greedy:
                tok = logits[: self.target_vocab].argmax()
            else:
                q = self._dist(logits, params)
                tok = sample(q, generator)
                dists.append(q)
            out.append(tok)
            if i < k - 1:
                logits = self.runner.forward(tok.reshape(1), n_logits=1).logits[-1]
        probs = torch.stack(dists) if dists else None
        return Draft(torch.stack(out).to(tokens.device), probs)

    def accept(self, tokens: torch.Tensor, n_new: int, hidden) -> None:
        # its cache holds the old sequence + drafts; what the target kept is all but the bonus token
        self.runner.rollback(min(self.runner.length, tokens.shape[0] - 1))
