"""The one registry of decoding methods. A new drafter is a package plus one line here."""

from __future__ import annotations

from importlib import import_module

from draftsmith.drafters.base import Drafter
from draftsmith.errors import DraftsmithError

ENTRIES = {
    "plain": "draftsmith.drafters.plain:PlainDrafter",
    "ngram": "draftsmith.drafters.ngram:NgramDrafter",
    "draft-model": "draftsmith.drafters.draft_model:DraftModelDrafter",
    "dflash": "draftsmith.drafters.dflash.drafter:DFlashDrafter",
    "dspark": "draftsmith.drafters.dflash.drafter:DSparkDrafter",
    "hybrid": "draftsmith.drafters.hybrid:HybridDrafter",
    "eagle3": "draftsmith.drafters.eagle3.drafter:Eagle3Drafter",
    "distilled": "draftsmith.drafters.distilled.drafter:DistilledDrafter",
    "mtp": "draftsmith.drafters.mtp.drafter:MTPDrafter",
    "medusa": "draftsmith.drafters.medusa.drafter:MedusaDrafter",
}
"""method name -> "module:Class" of its Drafter (the class names its training recipe, if any)."""


def _load(path: str) -> type[Drafter]:
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


METHODS: dict[str, type[Drafter]] = {method: _load(path) for method, path in ENTRIES.items()}


def build_drafter(method: str, target, **options) -> Drafter:
    """Instantiate a registered method for `target`; options are the CLI/API drafter flags."""
    if method not in METHODS:
        raise DraftsmithError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    return METHODS[method].build(target, **options)


def base_method(name: str) -> str | None:
    """The registered method of `name`: itself, or METHOD for a variant "METHOD:LABEL" (the same
    method with another trained drafter, so two drafters of one method compare in one bench)."""
    base, sep, label = name.partition(":")
    if base not in METHODS or (sep and not label):
        return None
    return base


def drafter_path(paths: dict[str, str], method: str) -> str | None:
    """The directory given for `method` in {method: dir, "*": dir for any method}; the hybrid method
    drafts with a DSpark drafter, so a dspark directory serves it too. A variant "METHOD:LABEL" has
    only its own directory: falling back to METHOD's would bench the same drafter twice."""
    if ":" in method:
        if method not in paths:
            raise DraftsmithError(f"{method} needs its own drafter: --drafter {method}=DIR")
        return paths[method]
    fallback = paths.get("dspark") if method == "hybrid" else None
    return paths.get(method) or fallback or paths.get("*")


def option_for(values: dict, method: str) -> object | None:
    """The value given for `method` (a method or a variant "METHOD:LABEL") in {method: value, "*":
    every method}, or None (the method's default)."""
    return values.get(method, values.get("*"))
