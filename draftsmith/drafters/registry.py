"""The one registry of decoding methods. A new drafter is a package plus one line here."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING, Any

from draftsmith.errors import DraftsmithError

if TYPE_CHECKING:
    from draftsmith.engine.drafter import Drafter
    from draftsmith.training.recipe import Recipe

ENTRIES = {
    "plain": "draftsmith.drafters.plain:PlainDrafter",
    "ngram": "draftsmith.drafters.ngram:NgramDrafter",
    "draft-model": "draftsmith.drafters.draft_model:DraftModelDrafter",
    "dflash": "draftsmith.drafters.dflash.drafter:DFlashDrafter",
    "dspark": "draftsmith.drafters.dspark.drafter:DSparkDrafter",
    "hybrid": "draftsmith.drafters.hybrid:HybridDrafter",
    "eagle3": "draftsmith.drafters.eagle3.drafter:Eagle3Drafter",
    "distilled": "draftsmith.drafters.distilled.drafter:DistilledDrafter",
    "mtp": "draftsmith.drafters.mtp.drafter:MTPDrafter",
    "medusa": "draftsmith.drafters.medusa.drafter:MedusaDrafter",
}
"""method name -> "module:Class" of its Drafter (the class names its training recipe, if any)."""


@cache
def _load(path: str) -> type[Drafter]:
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


class _Methods(Mapping):
    """method name -> Drafter class, imported on first use: listing the methods (or running one)
    does not import every drafter package with its model code."""

    def __getitem__(self, method: str) -> type[Drafter]:
        return _load(ENTRIES[method])

    def __iter__(self) -> Iterator[str]:
        return iter(ENTRIES)

    def __len__(self) -> int:
        return len(ENTRIES)


METHODS: Mapping[str, type[Drafter]] = _Methods()


def build_drafter(method: str, target, options: Any = None, k: int | None = None, **values: Any) -> Drafter:
    """Instantiate a registered method for `target` with its options: an instance of its Drafter's
    `options` dataclass (None: the defaults), or from the Python API option values by name
    (`method_options`). k: the draft length (None: the method's own)."""
    if method not in METHODS:
        raise DraftsmithError(f"unknown method {method!r}; choose one of: {', '.join(METHODS)}")
    cls = METHODS[method]
    if values:
        if options is not None:
            raise TypeError("build_drafter takes an options instance or option values, not both")
        options = method_options(method, values)
    elif options is not None and not (cls.options and isinstance(options, cls.options)):
        wanted = cls.options.__name__ if cls.options else "no options"
        raise TypeError(f"method {method!r} takes {wanted}, got {type(options).__name__}")
    return cls.build(target, options, k=k)


def method_options(name: str, values: Mapping[str, Any]) -> Any:
    """The options of a method or bench variant `name` (an instance of its Drafter's `options`; None
    for a method without options) from option values by name, as the API and the CLI hold them. A
    value may be given per method, {method or variant: value, "*": every method} (`drafter_path`,
    `option_for`). Names that only other methods take are left out, so one set of values serves
    several methods; a name no method takes is an error; None keeps the method's default."""
    method = base_method(name)
    if method is None:
        raise DraftsmithError(f"unknown method {name!r}; choose one of: {', '.join(METHODS)}")
    opts = METHODS[method].options
    names = {f.name for f in dataclasses.fields(opts)} if opts else set()
    if set(values) - names:
        known = {f.name for cls in METHODS.values() if cls.options for f in dataclasses.fields(cls.options)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise DraftsmithError(
                f"no method takes option(s) {', '.join(unknown)}; options: {', '.join(sorted(known))}"
            )
    drafter = values.get("drafter")
    if isinstance(drafter, dict) or ":" in name:  # {method: dir, "*": any}; a variant needs its own
        drafter = drafter_path(drafter if isinstance(drafter, dict) else {}, name)
    given = {}
    for key in names:
        value = drafter if key == "drafter" else values.get(key)
        value = option_for(value, name) if isinstance(value, dict) else value
        if value is not None:
            given[key] = value
    return opts(**given) if opts else None


def recipe_for(method: str) -> Recipe:
    """The training recipe of a registered method; a clear error for methods that are not trained."""
    trainable = trainable_methods()
    if method not in METHODS:
        raise DraftsmithError(f"unknown method {method!r}; trainable methods: {', '.join(trainable)}")
    recipe = METHODS[method].recipe
    if recipe is None:
        raise DraftsmithError(f"method {method!r} is not trained; trainable methods: {', '.join(trainable)}")
    return recipe


def trainable_methods() -> list[str]:
    return [m for m, cls in METHODS.items() if cls.recipe is not None]


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
