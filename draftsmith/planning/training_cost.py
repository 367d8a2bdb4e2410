"""What building a drafter costs on given hardware, before anyone rents it: the target's answers
(batched decoding), the target cache (one forward over every answer) and the drafter's training steps.

A roofline estimate, labelled as one: decoding a batch reads the weights once a step at the engine's
achievable bandwidth plus its compute (planning.steps); the cache is one forward at the backend's
compute efficiency; training is 6 FLOPs per drafter parameter per trained slot (forward and backward)
at a training utilisation (MFU) that is assumed, not fitted, and neither step goes below an assumed
floor (small models on big GPUs are bound by per-step overheads): no GPU run of ours was measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from draftsmith.planning import backends
from draftsmith.planning.hardware import Hardware
from draftsmith.planning.methods import drafter_cost
from draftsmith.planning.model_spec import ModelSpec
from draftsmith.planning.steps import RooflineSteps

TRAIN_MFU = 0.3
"""Share of peak FLOP/s a drafter's training step reaches: an assumption (small models on big GPUs
typically reach 20-40%), not a fit."""
DECODE_BATCH = 64  # sequences a regeneration server decodes together
DECODE_STEP_FLOOR_S = 0.010
"""A batched decode step never takes less (scheduling, sampling and detokenising 64 sequences): an
assumption that matters only for small targets, whose roofline step is far shorter."""
TRAIN_STEP_FLOOR_S = 0.050
"""A training step never takes less (data loading, optimizer, launches): assumed, as above."""


@dataclass(frozen=True)
class TrainingCost:
    answers: int
    answer_tokens: int
    steps: int
    devices: int
    regenerate_s: float
    cache_s: float
    train_s: float

    @property
    def total_s(self) -> float:
        return self.regenerate_s + self.cache_s + self.train_s

    def to_json(self) -> dict:
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in self.__dict__.items()} | {
            "total_s": round(self.total_s, 1),
            "assumptions": __doc__.strip().splitlines()[2:6],
        }

    def markdown(self, hw: Hardware, spec: ModelSpec, method: str) -> str:
        def t(s: float) -> str:
            return f"{s / 3600:.1f} h" if s >= 3600 else f"{s / 60:.1f} min"

        return "\n".join(
            [
                f"## Building a {method} drafter for {spec.name} on {self.devices} x {hw.name} (an estimate)",
                "",
                "| stage | work | time |",
                "|---|---|---|",
                f"| answers | {self.answers:,} x {self.answer_tokens} tokens, batch {DECODE_BATCH} | "
                f"{t(self.regenerate_s)} |",
                f"| cache | one target forward over every answer | {t(self.cache_s)} |",
                f"| training | {self.steps:,} steps | {t(self.train_s)} |",
                f"| all | | {t(self.total_s)} |",
                "",
                "Roofline: decoding and the cache at the engine's fitted efficiencies, training at an "
                f"assumed {TRAIN_MFU:.0%} of peak FLOP/s (6 FLOPs per drafter parameter per trained slot), "
                f"with assumed floors of {DECODE_STEP_FLOOR_S * 1000:.0f} ms a batched decode step and "
                f"{TRAIN_STEP_FLOOR_S * 1000:.0f} ms a training step; not measured on a GPU here.",
            ]
        )


def estimate(
    spec: ModelSpec,
    hw: Hardware,
    method: str,
    answers: int,
    steps: int,
    devices: int = 1,
    answer_tokens: int = 256,
    prompt_tokens: int = 128,
    batch: int = 8,
    anchors: int = 64,
    block: int = 7,
) -> TrainingCost:
    """Time to regenerate `answers`, cache them and train `steps` of batch x anchors blocks."""
    engine = backends.backend("vllm" if hw.kind != "cpu" else "llamacpp", hw.kind, spec.bits)
    context = prompt_tokens + answer_tokens / 2
    decode = RooflineSteps(hw, spec, context, DECODE_BATCH, backend=engine)
    step = max(decode.target(1), DECODE_STEP_FLOOR_S)
    regenerate = answers * answer_tokens / (DECODE_BATCH / step) / devices
    flops = (hw.flops or 1e12) * engine.compute_efficiency
    cache = 2 * spec.active_params * answers * (prompt_tokens + answer_tokens) / flops / devices
    d = drafter_cost(method, spec)
    trained = steps * batch * anchors * block  # slots with a loss
    per_step = 6 * d.read_params * trained / steps / ((hw.flops or 1e12) * TRAIN_MFU) / devices
    train = steps * max(per_step, TRAIN_STEP_FLOOR_S)
    return TrainingCost(answers, answer_tokens, steps, devices, regenerate, cache, train)
