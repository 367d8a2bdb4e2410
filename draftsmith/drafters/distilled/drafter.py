"""Method "distilled": the external-draft-model method with a draft trained here from the target.

Drafting is exactly DraftModelDrafter's (token by token, own rollback KV cache); this method adds
what `draftsmith train` needs (its recipe) and, when loading `--drafter DIR`, the check that DIR
was distilled from this very target. The same directory also works as
`--method draft-model --draft-model DIR`, which checks the tokenizer only.
"""

from __future__ import annotations

from pathlib import Path

import torch

from draftsmith.drafters.distilled.checkpoint import META, check_target, load_draft
from draftsmith.drafters.distilled.model import DistilledDraft
from draftsmith.drafters.distilled.recipe import DistilledRecipe
from draftsmith.drafters.draft_model import DraftModelDecodeOptions, DraftModelDrafter
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.errors import DraftsmithError

NEEDS_DIR = (
    "method 'distilled' needs --drafter DIR (a distilled draft model): train one with "
    "`draftsmith train --method distilled`"
)


class DistilledDrafter(DraftModelDrafter):
    name = "distilled"
    description = "a few of the target's own layers distilled into a small draft LM (drafts token by token)"
    recipe = DistilledRecipe()
    options = TrainedDecodeOptions
    export_formats = ("hf",)

    @classmethod
    def owns(cls, path, config: dict | None) -> bool:
        return (Path(path) / META).is_file()

    @classmethod
    def export(cls, directory, fmt: str, out, target, verifier):
        from draftsmith.drafters.distilled.export import write_hf

        return write_hf(directory, out, target)

    @classmethod
    def load_model(cls, target, drafter=None, dtype: torch.dtype | None = None) -> DistilledDraft:
        """The trained draft as a model the recipe can score (`draftsmith score --method distilled`)."""
        if not drafter:
            raise DraftsmithError(NEEDS_DIR)
        return drafter if isinstance(drafter, DistilledDraft) else load_draft(drafter, target, dtype)

    @classmethod
    def build(
        cls, target, options: TrainedDecodeOptions | None = None, k: int | None = None
    ) -> DistilledDrafter:
        drafter = (options or TrainedDecodeOptions()).drafter
        if isinstance(drafter, DistilledDraft):  # an in-memory draft (tests, notebooks)
            return cls(drafter.lm.eval(), target.runner.vocab_size, k=4 if k is None else k)
        if not drafter:
            raise DraftsmithError(NEEDS_DIR)
        check_target(drafter, target)
        return super().build(target, DraftModelDecodeOptions(draft_model=str(drafter)), k=k)
