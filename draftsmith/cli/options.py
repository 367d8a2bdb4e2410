"""Command-line flags from the methods' option dataclasses: one flag per field name of any method,
applied to the methods that have it. `train` gets the trainable methods' training options, the
decoding commands each drafter's decoding options; a new method adds flags without touching the CLI.

A field's metadata may hold "help", "flag" (where the flag name differs from the field's), "choices",
and "per_method" (the flag repeats as VALUE or METHOD=VALUE, so each method or bench variant can
have its own value)."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from draftsmith.errors import DraftsmithError

if TYPE_CHECKING:
    from draftsmith.training.recipe import Recipe

PREFIX = "opt_"
"""Derived flags store their values as opt_<field name>, and only when given: each method applies
its own defaults (and validates the values it is given)."""


def training_options() -> dict[str, type]:
    """{trainable method: its training options dataclass} (the recipe's)."""
    from draftsmith.drafters.registry import recipe_for, trainable_methods

    return {m: recipe_for(m).options for m in trainable_methods()}


def decoding_options() -> dict[str, type]:
    """{method: its decoding options dataclass} (the Drafter's), for the methods that take options."""
    from draftsmith.drafters.registry import METHODS

    return {m: cls.options for m, cls in METHODS.items() if cls.options is not None}


def _flag(f: dataclasses.Field) -> str:
    return f.metadata.get("flag", "--" + f.name.replace("_", "-"))


@dataclasses.dataclass
class OptionFlag:
    """One flag: the option's name and type, and per method that has it, its options class and field
    (default, help)."""

    name: str
    kind: type
    classes: dict[str, type]
    fields: dict[str, dataclasses.Field]

    @property
    def flag(self) -> str:
        return _flag(next(iter(self.fields.values())))

    @property
    def per_method(self) -> bool:
        return any(f.metadata.get("per_method") for f in self.fields.values())

    def help(self) -> str:
        """One line for the flag: its help and default, per method where the methods differ."""
        first = next(iter(self.fields.values()))
        helps = {m: f.metadata.get("help", "") for m, f in self.fields.items()}
        defaults = {m: f.default for m, f in self.fields.items()}
        if len(set(helps.values())) > 1:  # a flag that means something else per method
            groups: dict[tuple[str, str], list[str]] = {}
            for m in self.fields:
                groups.setdefault((helps[m], repr(defaults[m])), []).append(m)
            text = "; ".join(f"{', '.join(ms)}: {h} (default {d})" for (h, d), ms in groups.items())
        else:
            if len(set(map(repr, defaults.values()))) == 1:
                where = f"{', '.join(defaults)}; default {first.default}"
            else:
                where = "; ".join(f"{m} default {d}" for m, d in defaults.items())
            text = f"{first.metadata.get('help', '')} [{where}]".strip()
        if self.per_method:
            text += "; or METHOD=VALUE for one method or bench variant (repeatable)"
        return text

    def declared_choices(self) -> list:
        """Every method's choices, in the order the methods declare them ([] where any takes any)."""
        per_method = [f.metadata.get("choices") for f in self.fields.values()]
        if any(c is None for c in per_method):
            return []
        return list(dict.fromkeys(c for cs in per_method for c in cs))

    def choices(self) -> list | None:
        return sorted(self.declared_choices(), key=str) or None

    def value(self, given: str, raw: str) -> Any:
        """One value of a per-method flag (`given` as typed, `raw` its VALUE part) as the option's type,
        checked by the options of every method that has it: here, before any slow model load."""
        try:
            value = self.kind(raw)
        except ValueError:
            raise DraftsmithError(f"{self.flag} {given}: {raw!r} is not a number") from None
        choices = self.declared_choices()
        if choices and value not in choices:
            raise DraftsmithError(f"{self.flag} {given}: {raw!r} is not one of {', '.join(choices)}")
        for cls in self.classes.values():
            try:
                cls(**{self.name: value})
            except DraftsmithError as e:
                raise DraftsmithError(f"{self.flag} {given}: {e}") from None
        return value


def option_fields(options: Mapping[str, type]) -> dict[str, OptionFlag]:
    """The option fields of {method: options dataclass} by name (methods may share a name, e.g. --label)."""
    out: dict[str, OptionFlag] = {}
    for method, opts in options.items():
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
                out[f.name].classes[method] = opts
                out[f.name].fields[method] = f
            else:
                out[f.name] = OptionFlag(f.name, kind, {method: opts}, {method: f})
    return out


GROUPS = {
    "draftsmith-only": "draftsmith-only options (no engine or export format runs them; export refuses them)",
    "experimental": "experimental options (no held-out gain measured; docs/experiments.md)",
}
"""Where a field's metadata "group" puts its flag in --help, apart from the options people use."""


def add_option_flags(
    group: argparse._ActionsContainer,
    options: Mapping[str, type],
    skip: Collection[str] = (),
    parser: argparse.ArgumentParser | None = None,
) -> None:
    """One flag per option field of any of the methods in {method: options dataclass}, but those in
    `skip` (flags written by hand); unset flags stay absent from the namespace. With `parser`, a
    field whose metadata names a GROUPS entry goes to that group of the parser's help."""
    groups: dict[str, argparse._ActionsContainer] = {}
    for name, opt in option_fields(options).items():
        if name in skip:
            continue
        kind = next(iter(opt.fields.values())).metadata.get("group")
        target = group
        if parser is not None and kind in GROUPS:
            if kind not in groups:
                groups[kind] = parser.add_argument_group(GROUPS[kind])
            target = groups[kind]
        _add_flag(target, name, opt)


def _add_flag(group: argparse._ActionsContainer, name: str, opt: OptionFlag) -> None:
    common = {"dest": PREFIX + name, "default": argparse.SUPPRESS, "help": opt.help()}
    metavar = opt.flag.lstrip("-").replace("-", "_").upper()  # argparse's own, from the flag
    if opt.per_method:
        group.add_argument(opt.flag, action="append", metavar=metavar, **common)
    elif opt.kind is bool:
        group.add_argument(opt.flag, action=argparse.BooleanOptionalAction, **common)
    else:
        choices = opt.choices()
        metavar = None if choices else metavar  # argparse then lists the choices
        group.add_argument(opt.flag, type=opt.kind, choices=choices, metavar=metavar, **common)


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The derived flags the user gave, by option name."""
    return {k.removeprefix(PREFIX): v for k, v in vars(args).items() if k.startswith(PREFIX)}


def options_from_args(recipe: Recipe, args: argparse.Namespace) -> Any:
    """The training options the user gave on the command line, for `recipe`'s method; a flag of
    another method only is an error."""
    from draftsmith.training.recipe import make_options

    given = given_options(args)
    fields = option_fields(training_options())
    foreign = sorted(k for k in given if recipe.method not in fields[k].fields)
    if foreign:
        flags = ", ".join(fields[k].flag for k in foreign)
        raise DraftsmithError(f"{flags} do(es) not apply to --method {recipe.method}")
    return make_options(recipe, given)
