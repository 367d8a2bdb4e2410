"""Request text -> token ids, through the same code `draftsmith generate` uses.

A chat with one user message is encoded by `Target.encode` (the model's chat template, exactly as
the library and CLI apply it), so a server answer equals `draftsmith.generate` on that prompt. A
longer conversation goes through the same template with all its turns. /v1/completions takes raw
text (no template, as in the OpenAI API) or token ids.
"""

from __future__ import annotations

from draftsmith.errors import DraftsmithError
from draftsmith.models.target import Target


class PromptTooLongError(DraftsmithError):
    """The prompt leaves no room in the model's context (HTTP 400, code context_length_exceeded)."""


class PromptEncoder:
    """Tokenizes prompts for one target and checks them against its context."""

    def __init__(self, target: Target, max_context: int | None = None) -> None:
        self.target = target
        self.max_context = max_context or target.runner.max_context  # a batched worker's slot size
        self.vocab_size = target.runner.vocab_size

    def chat(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids for a conversation of {"role", "content"} turns, ready for the assistant's reply."""
        if not messages:
            raise DraftsmithError("messages must hold at least one message")
        if not any(m["content"].strip() for m in messages):
            raise DraftsmithError("the prompt is empty")
        if len(messages) == 1 and messages[0]["role"] == "user":
            ids = self.target.encode(messages[0]["content"], chat=True)
        elif getattr(self.target.tokenizer, "chat_template", None):
            try:
                ids = self.target.tokenizer.apply_chat_template(
                    messages, add_generation_prompt=True, tokenize=True
                )
            except Exception as e:  # the template's own checks (e.g. role order) are user errors
                raise DraftsmithError(f"the chat template rejected the messages: {e}") from e
            if hasattr(ids, "keys"):
                ids = ids["input_ids"]
            ids = list(ids)
        else:  # a model without a chat template: the turns as plain text
            ids = self.target.encode("\n\n".join(m["content"] for m in messages if m["content"]), chat=False)
        return self.check(ids)

    def completion(self, prompt: str | list[int]) -> list[int]:
        """Token ids for a raw prompt: text (no chat template) or a list of token ids."""
        if isinstance(prompt, str):
            return self.check(self.target.encode(prompt, chat=False))
        bad = [t for t in prompt if not 0 <= t < self.vocab_size]
        if bad:
            raise DraftsmithError(f"token ids must be in 0..{self.vocab_size - 1}, got {bad[:5]}")
        return self.check(list(prompt))

    def check(self, ids: list[int]) -> list[int]:
        if not ids:
            raise DraftsmithError("the prompt is empty")
        if len(ids) >= self.max_context:
            raise PromptTooLongError(
                f"the prompt has {len(ids)} tokens but the context holds {self.max_context} "
                "(prompt and completion together)"
            )
        return ids
