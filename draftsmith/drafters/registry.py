"""The one registry of decoding methods. A new drafter is a module plus one line here."""

from __future__ import annotations

from draftsmith.drafters.base import Drafter
from draftsmith.drafters.dflash.drafter import DFlashDrafter, DSparkDrafter
from draftsmith.drafters.draft_model import DraftModelDrafter
from draftsmith.drafters.hybrid import HybridDrafter
from draftsmith.drafters.ngram import NgramDrafter
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.errors import DraftsmithError

METHODS: dict[str, type[Drafter]] = {
    "plain": PlainDrafter,
    "ngram": NgramDrafter,
    "draft-model": DraftModelDrafter,
    "dflash": DFlashDrafter,
    "dspark": DSparkDrafter,
    "hybrid": HybridDrafter,
}


def build_drafter(method: str, target, **options) -> Drafter:
    """Instantiate a registered method for `target`; options are the CLI/API drafter flags."""
    if method not in METHODS:
        raise DraftsmithError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    return METHODS[method].build(target, **options)


def drafter_path(paths: dict[str, str], method: str) -> str | None:
    """The directory given for `method` in {method: dir, "*": dir for any method}; the hybrid method
    drafts with a DSpark drafter, so a dspark directory serves it too."""
    fallback = paths.get("dspark") if method == "hybrid" else None
    return paths.get(method) or fallback or paths.get("*")
