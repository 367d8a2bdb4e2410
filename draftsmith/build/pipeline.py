"""`draftsmith build`: from a user's prompts to a drafter, its scores, a bench, exports and a report,
in one resumable run. Stages that finished are reused, so a rerun after a kill picks up where it
stopped and a rerun of a finished build ends in seconds (it loads no model)."""

from __future__ import annotations

import functools
from dataclasses import asdict
from pathlib import Path

from draftsmith.build import stages
from draftsmith.build.report import write_report
from draftsmith.build.state import BuildState


class Targets:
    """The target, loaded when a stage first needs it: in fp32 for the data stages and training (the
    cache's features as the shipped drafters were trained on, batch-independent answers), in the
    engine's default mode for STS and the bench (what users decode with)."""

    def __init__(self, source: str | None, device: str = "auto") -> None:
        self.source, self.device = source, device

    @functools.cache  # noqa: B019 (one build, one Targets)
    def load(self, dtype: str):
        from draftsmith.api import load_target

        return load_target(self.source, dtype, self.device)

    def fp32(self):
        return self.load("float32")

    def auto(self):
        return self.load("auto")


def run_build(s: stages.BuildSettings, out: Path, api_key: str | None = None, device: str = "auto") -> dict:
    s.check()
    state = BuildState(out, asdict(s))
    targets = Targets(s.target, device)
    init = functools.cache(lambda: stages.init_drafter(s, targets.fp32()))
    state.run("prompts", lambda: stages.stage_prompts(s, out, init() is not None))
    state.run("answers", lambda: stages.stage_answers(s, out, targets.fp32, api_key), "greedy, resumable")

    def cache() -> dict:
        return stages.stage_cache(s, out, targets.fp32())

    state.run("cache", cache, "the target's hidden states of each answer")

    def train() -> dict:
        from draftsmith.training.cache import TargetCache

        t = targets.fp32()
        speed = lambda: stages.decode_speed(targets.auto(), out)  # noqa: E731
        chosen = stages.choose_steps(s, state, t, TargetCache(out / "cache", t), speed)
        eta = f", ~{chosen['steps'] * chosen['step_s'] / 60:.0f} min" if "step_s" in chosen else ""
        print(f"build: train: {chosen['steps']} steps ({chosen['from']}{eta})", flush=True)
        return stages.stage_train(s, state, t, chosen)

    state.run("train", train, stages.budget_estimate(s))
    if s.method == "dspark":
        state.run("sts", lambda: stages.stage_sts(s, out, targets.auto), "24 training prompts decoded")
    state.run("score", lambda: stages.stage_score(s, out, targets.fp32()), "held-out answers")
    state.run("bench", lambda: stages.stage_bench(s, out, targets.auto, init()), "interleaved, 2 repeats")
    state.run("export", lambda: stages.stage_export(s, out, targets.fp32()))
    state.run("report", lambda: write_report(out, s, state.record))
    return {"out": str(out), "report": str(out / "report.md"), "seconds": round(state.elapsed(), 1)}
