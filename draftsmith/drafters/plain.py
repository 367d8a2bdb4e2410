"""No drafter: plain autoregressive decoding through the same loop, so comparisons are fair."""

from __future__ import annotations

from draftsmith.engine.drafter import Draft, Drafter


class PlainDrafter(Drafter):
    name = "plain"
    description = "no speculation: one target forward per token (the baseline)"
    default_k = 0

    def propose(self, tokens, k, params, generator) -> Draft:
        return Draft.empty(tokens.device)
