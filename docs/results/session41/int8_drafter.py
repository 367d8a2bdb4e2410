"""Would int8 weights make drafting cheaper without costing acceptance? Each round the target's
~270 MB of weights push the drafter's ~22 MB out of cache, so drafting streams them again; int8
(per output channel, weight-only: torch's `_weight_int8pack_mm`) halves that stream.
Usage: python docs/results/session41/int8_drafter.py time METHOD SUITE N_PROMPTS
         (decode N prompts with the shipped drafter: bf16-packed and int8, alternating; drafting and
          verification ms a round, tau, and whether both decode the same tokens)
       python docs/results/session41/int8_drafter.py walk CACHE ANSWERS DIR...
         (dev walk tau with the weights rounded to int8 and back, against the drafter as stored)
"""

import sys
import time

import torch
from torch import nn

from draftsmith.engine.packing import PackedLinear


def quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row int8 of w [out, in]: (int8 weights, scales [out])."""
    scales = w.float().abs().amax(1).clamp(min=1e-12) / 127
    return (w.float() / scales[:, None]).round().clamp(-127, 127).to(torch.int8), scales


class Int8Linear(nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.weight, self.bias = weight, bias  # kept for code that reads dtype/shape
        self.wq, s = quantize(weight.detach())
        self.scales = s.to(weight.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1]).to(self.scales.dtype)
        y = torch.ops.aten._weight_int8pack_mm(flat, self.wq, self.scales).view(*x.shape[:-1], -1)
        return y if self.bias is None else y + self.bias


def to_int8(model: nn.Module, min_params: int = 0) -> None:
    """Swap the drafter's linears (packed or not) and its packed head for int8 ones."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, (nn.Linear, PackedLinear)) and child.weight.numel() >= min_params:
                if child.weight.shape[0] > 1:
                    setattr(parent, name, Int8Linear(child.weight, child.bias))
    if getattr(model, "head", None) is not None:
        model.head_int8 = Int8Linear(model.head, None)
        model.head_packed = None
        # an instance attribute (not a module) shadows the class's base_logits, which reads the head
        model.base_logits = model.head_int8.forward


def fake_quant(model: nn.Module) -> None:
    """Round every trainable 2-D weight (and the head) to int8 and back, in place (for the walk)."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2 and p.shape[0] > 1 and p.shape[1] > 1:
                q, s = quantize(p)
                p.copy_((q.float() * s[:, None]).to(p.dtype))
        if model.head is not None:
            q, s = quantize(model.head)
            model.head = (q.float() * s[:, None]).to(model.head.dtype)


def run_time(method: str, suite: str, n: int) -> None:
    from draftsmith.drafters.registry import build_drafter
    from draftsmith.engine.decode import speculative_generate
    from draftsmith.evaluation.suites import load_suite
    from draftsmith.models.target import Target

    target = Target.load(None)
    arms = {"bf16": build_drafter(method, target), "int8": build_drafter(method, target)}
    to_int8(arms["int8"].model)
    prompts = [target.encode(p.text, chat=p.chat) for p in load_suite(suite, n)]
    sums = {a: [0.0, 0.0, 0.0, 0.0] for a in arms}  # rounds, draft_s, verify_s, tokens
    outs: dict = {a: [] for a in arms}
    for rep in range(2):
        for ids in prompts:
            for a in arms if rep % 2 == 0 else list(arms)[::-1]:
                res = speculative_generate(target.runner, arms[a], ids, target.stop_rule(128))
                if rep:
                    s = res.stats
                    new = (s.rounds, s.draft_s, s.verify_s, s.new_tokens)
                    sums[a] = [x + y for x, y in zip(sums[a], new, strict=True)]
                    outs[a].append(res.tokens)
    for a, (r, d, v, t) in sums.items():
        print(
            f"{method} {suite} {a}: drafting {1000 * d / r:.3f} ms a round, "
            f"verification {1000 * v / r:.2f} ms, tau {t / r:.3f}, {1000 * (d + v) / t:.2f} ms a token"
        )
    print("same tokens:", outs["bf16"] == outs["int8"])


def run_walk(cache: str, answers: str, dirs: list[str]) -> None:
    import json

    from draftsmith.api import load_target
    from draftsmith.drafters.dflash.checkpoint import load_drafter
    from draftsmith.drafters.dflash.config import DFlashConfig
    from draftsmith.training.cache import TargetCache
    from draftsmith.training.recipe import make_options, recipe_for

    target = load_target(dtype="float32", fixed_rows=0)
    data = TargetCache(cache, target)
    suites = [json.loads(line)["category"] for line in open(answers)]
    for d in dirs:
        for arm in ("stored", "int8"):
            recipe = recipe_for(DFlashConfig.load(d).method)
            model = load_drafter(d, target, torch.float32)
            if arm == "int8":
                fake_quant(model)
            opts = make_options(recipe, {"anchors": 64})
            tok = {}
            with torch.no_grad():
                for i in range(len(data)):
                    s = data[i]
                    w = recipe.walk(model, [s], opts)
                    t = int(s.loss_mask.sum()) - 1
                    if t < 1:
                        continue
                    for key in (suites[i], "all"):
                        a = tok.setdefault(key, [0.0, 0.0, 0.0])
                        a[0] += t
                        a[1] += t / w["tau_walk"]
                        a[2] += t / w["tau_walk_k3"]
            cells = "  ".join(f"{k} {a[0] / a[1]:.3f}/{a[0] / a[2]:.3f}" for k, a in sorted(tok.items()))
            print(f"{d} {arm}: {cells}", flush=True)


if __name__ == "__main__":
    t0 = time.time()
    if sys.argv[1] == "time":
        run_time(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        run_walk(sys.argv[2], sys.argv[3], sys.argv[4:])
    print(f"({time.time() - t0:.0f} s)")
