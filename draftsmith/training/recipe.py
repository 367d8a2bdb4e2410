"""What a trainable method tells the generic trainer: its options, model, batch layout, loss and
checkpoint format.

The trainer (training/train.py), the target cache and the CLI know nothing about any method: a
drafter class in the registry names its `recipe`, and the trainer asks it. A method's options are
a dataclass (defaults and validation live there); the CLI derives its `train` flags from those
fields, so a new method adds flags without touching cli.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

import torch
from torch import nn

from draftsmith.errors import DraftsmithError


class Recipe:
    """Base class of a method's training recipe. One instance per trainable method."""

    method: str = ""
    options: type = object  # a dataclass: the method's settings, validated in its __post_init__
    old_defaults: dict[str, Any] = {}  # options added after runs were saved, at the values those used
    # on CPU the trainer keeps freed memory in the heap (engine/allocator.py: no page faults on the
    # step's big tensors); a recipe whose steps allocate ever-changing sizes opts out: that
    # never-trimmed heap then grew without bound (distilled/recipe.py), and it gets
    # allocator.bound_freed_memory instead
    heap_only: bool = True

    def build(self, target, opts: Any, layers: list[int], data) -> nn.Module:
        """A new drafter for `target`, initialised and on the target's device, with the frozen target
        tensors it borrows attached. layers: the target layers the training data holds."""
        raise NotImplementedError

    def attach(self, model: nn.Module, target) -> None:
        """Re-borrow the frozen target tensors after load_state_dict (a resume)."""

    def batch(self, seqs: list, opts: Any, model: nn.Module, generator: torch.Generator) -> Any:
        """Lay out cache sequences (training/cache.Sequence) as one batch on the model's device."""
        raise NotImplementedError

    def loss(self, model: nn.Module, batch: Any, opts: Any) -> tuple[torch.Tensor, dict[str, float]]:
        """The training loss and metrics; metrics hold "loss" and, where it means something, the
        teacher-forced accepted length "tau_est" (shown on the progress bar)."""
        raise NotImplementedError

    def evaluate(self, model: nn.Module, seqs: list, opts: Any) -> dict[str, float]:
        """Held-out metrics, deterministic for the same sequences: "tau" (accepted length against the
        written tokens), "tau_greedy" (against the target's argmax) and their "_k3" capped forms, so
        runs of different methods compare on one scale."""
        raise NotImplementedError

    def walk(self, model: nn.Module, seqs: list, opts: Any) -> dict[str, float]:
        """Held-out accepted length along greedy decoding's walk ("tau_walk", "tau_walk_k3"), for
        methods that can score every answer position; {} for the rest."""
        return {}

    def save(self, model: nn.Module, out: Path, dtype: torch.dtype | None) -> None:
        """Write the drafter directory that `--method METHOD --drafter out` loads."""
        raise NotImplementedError

    def load(self, target, source=None, dtype: torch.dtype | None = None) -> nn.Module:
        """A trained drafter (a directory; None: what the method finds by itself, e.g. the shipped
        one) in fp32 with fp32 target tensors, for held-out scoring (`draftsmith score`). Its weights
        pass through the target's dtype on the way (as in decoding) unless `dtype` says otherwise."""
        from draftsmith.drafters.registry import METHODS

        cls, kw = METHODS[self.method], {} if dtype is None else {"dtype": dtype}
        model = cls.load_model(target, source, **kw)
        model = model.float()
        self.attach(model, target)
        return model.eval()

    def score_layers(self, model: nn.Module) -> list[int] | None:
        """The target layers scoring data must hold for `model` (None: the cache default)."""
        return list(getattr(model.cfg, "target_layers", None) or []) or None

    def score_options(self, model: nn.Module, anchors: int) -> Any:
        """Options for evaluate(): `anchors` per sequence and the model's own draft depth."""
        names = {f.name for f in dataclasses.fields(self.options)}
        values = {"anchors": anchors, "block_size": getattr(model.cfg, "block_size", None)}
        return self.options(**{k: v for k, v in values.items() if k in names and v is not None})


def recipe_for(method: str) -> Recipe:
    """The recipe of a registered method; a clear error for methods that are not trained."""
    from draftsmith.drafters.registry import METHODS

    trainable = trainable_methods()
    if method not in METHODS:
        raise DraftsmithError(f"unknown method {method!r}; trainable methods: {', '.join(trainable)}")
    recipe = getattr(METHODS[method], "recipe", None)
    if recipe is None:
        raise DraftsmithError(f"method {method!r} is not trained; trainable methods: {', '.join(trainable)}")
    return recipe


def trainable_methods() -> list[str]:
    from draftsmith.drafters.registry import METHODS

    return [m for m, cls in METHODS.items() if getattr(cls, "recipe", None) is not None]


def make_options(recipe: Recipe, values: dict[str, Any]) -> Any:
    """The method's options from a flat dict; unknown names are an error that lists the known ones."""
    known = {f.name for f in dataclasses.fields(recipe.options)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise DraftsmithError(
            f"{recipe.method} has no option(s) {', '.join(unknown)}; its options: {', '.join(sorted(known))}"
        )
    return recipe.options(**values)


def _flag(f: dataclasses.Field) -> str:
    return f.metadata.get("flag", "--" + f.name.replace("_", "-"))


@dataclasses.dataclass
class OptionFlag:
    """One `train` flag: the option's type, and per method that has it, its field (default, help)."""

    kind: type
    fields: dict[str, dataclasses.Field]

    @property
    def flag(self) -> str:
        return _flag(next(iter(self.fields.values())))

    def help(self) -> str:
        """One line for the flag: its help and default, per method where the methods differ."""
        first = next(iter(self.fields.values()))
        helps = {m: f.metadata.get("help", "") for m, f in self.fields.items()}
        defaults = {m: f.default for m, f in self.fields.items()}
        if len(set(helps.values())) > 1:  # a flag that means something else per method
            groups: dict[tuple[str, str], list[str]] = {}
            for m in self.fields:
                groups.setdefault((helps[m], repr(defaults[m])), []).append(m)
            return "; ".join(f"{', '.join(ms)}: {h} (default {d})" for (h, d), ms in groups.items())
        if len(set(map(repr, defaults.values()))) == 1:
            where = f"{', '.join(defaults)}; default {first.default}"
        else:
            where = "; ".join(f"{m} default {d}" for m, d in defaults.items())
        return f"{first.metadata.get('help', '')} [{where}]".strip()

    def choices(self) -> list | None:
        per_method = [f.metadata.get("choices") for f in self.fields.values()]
        if any(c is None for c in per_method):
            return None
        return sorted({c for cs in per_method for c in cs}, key=str)


def option_fields() -> dict[str, OptionFlag]:
    """Every trainable method's option fields by name (methods may share a name, e.g. --label)."""
    out: dict[str, OptionFlag] = {}
    for method in trainable_methods():
        opts = recipe_for(method).options
        hints = typing.get_type_hints(opts)
        for f in dataclasses.fields(opts):
            kind = hints[f.name]
            if typing.get_origin(kind) in (typing.Union, types.UnionType):
                kind = next(a for a in typing.get_args(kind) if a is not type(None))
            if f.name in out:
                if out[f.name].kind is not kind:
                    raise TypeError(
                        f"option {f.name!r} has type {kind} in {method}, {out[f.name].kind} elsewhere"
                    )
                out[f.name].fields[method] = f
            else:
                out[f.name] = OptionFlag(kind, {method: f})
    return out


def add_option_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per option field of any trainable method; unset flags stay absent from the namespace,
    so each method applies its own defaults (and validates the values it is given)."""
    group = parser.add_argument_group("method options (each method has its own defaults)")
    for name, opt in option_fields().items():
        common = {"dest": "opt_" + name, "default": argparse.SUPPRESS, "help": opt.help()}
        if opt.kind is bool:
            group.add_argument(opt.flag, action=argparse.BooleanOptionalAction, **common)
        else:
            group.add_argument(opt.flag, type=opt.kind, choices=opt.choices(), **common)


def options_from_args(recipe: Recipe, args: argparse.Namespace) -> Any:
    """The options the user gave on the command line, for `recipe`'s method."""
    given = {k[4:]: v for k, v in vars(args).items() if k.startswith("opt_")}
    fields = option_fields()
    foreign = sorted(k for k in given if recipe.method not in fields[k].fields)
    if foreign:
        flags = ", ".join(fields[k].flag for k in foreign)
        raise DraftsmithError(f"{flags} do(es) not apply to --method {recipe.method}")
    return make_options(recipe, given)
