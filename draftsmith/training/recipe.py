"""What a trainable method tells the generic trainer: its options, model, batch layout, loss and
checkpoint format.

The trainer (training/train.py), the target cache and the CLI know nothing about any method: a
drafter class in the registry names its `recipe`, and the trainer asks it. A method's options are
a dataclass (defaults and validation live there); the CLI derives its `train` flags from those
fields (cli/options.py), so a new method adds flags without touching the CLI.
"""

from __future__ import annotations

import dataclasses
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
    drafter: type  # the Drafter class this recipe trains: set where the class names its recipe

    def __set_name__(self, owner: type, name: str) -> None:
        """`recipe = SomeRecipe(...)` in a Drafter's class body ties the recipe to that class, so
        loading a trained drafter needs no registry lookup."""
        self.drafter = owner

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
        kw = {} if dtype is None else {"dtype": dtype}
        model = self.drafter.load_model(target, source, **kw)
        model = model.float()
        self.attach(model, target)
        return model.eval()

    def score_layers(self, model: nn.Module) -> list[int] | None:
        """The target layers scoring data must hold for `model` (None: the cache default)."""
        return list(getattr(model.cfg, "target_layers", None) or []) or None

    def tune_options(self, model: nn.Module) -> Any:
        """Options that build `model` again, for fine-tuning it (`draftsmith build` from a shipped
        drafter): every option named like a field of its config takes that field's value."""
        cfg = getattr(model, "cfg", None)
        fields = {f.name: f for f in dataclasses.fields(self.options)}
        values = {k: getattr(cfg, k) for k in fields if cfg is not None and hasattr(cfg, k)}
        for k, v in values.items():  # a list the option spells as text, e.g. target layers "2,15,27"
            if isinstance(v, list | tuple) and isinstance(fields[k].default, str):
                values[k] = ",".join(map(str, v))
        return self.options(**values)

    def score_options(self, model: nn.Module, anchors: int) -> Any:
        """Options for evaluate(): `anchors` per sequence and the model's own draft depth."""
        names = {f.name for f in dataclasses.fields(self.options)}
        values = {"anchors": anchors, "block_size": getattr(model.cfg, "block_size", None)}
        return self.options(**{k: v for k, v in values.items() if k in names and v is not None})


def make_options(recipe: Recipe, values: dict[str, Any]) -> Any:
    """The method's options from a flat dict; unknown names are an error that lists the known ones."""
    known = {f.name for f in dataclasses.fields(recipe.options)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise DraftsmithError(
            f"{recipe.method} has no option(s) {', '.join(unknown)}; its options: {', '.join(sorted(known))}"
        )
    return recipe.options(**values)


