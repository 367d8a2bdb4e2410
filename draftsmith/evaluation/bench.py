"""The benchmark: every method on the same prompts, interleaved, repeated, summarised with medians.

Method order rotates per prompt and repeat so that slow drift (thermal, other processes) hits
every method alike. Speedup is plain time / method time over the same prompts within one repeat,
then the median over repeats. tau and per-position acceptance are pooled over all rounds.
Greedy losslessness is checked per prompt against the plain run.
"""

from __future__ import annotations

import datetime as dt
import platform
import statistics
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from draftsmith.drafters.registry import METHODS, base_method, build_drafter, method_options
from draftsmith.engine.cpu_load import OTHER_LOAD_MAX, OtherLoad
from draftsmith.engine.decode import speculative_generate
from draftsmith.engine.sampling import SamplingParams
from draftsmith.engine.stats import GenerationStats
from draftsmith.errors import DraftsmithError
from draftsmith.evaluation.llamacpp_peers import PEERS as LLAMACPP_PEERS
from draftsmith.evaluation.llamacpp_peers import baseline_of
from draftsmith.evaluation.peers import PEERS, HFPeer
from draftsmith.evaluation.reliability import by_position
from draftsmith.evaluation.suites import Prompt
from draftsmith.evaluation.vllm_peers import PEERS as VLLM_PEERS
from draftsmith.models.target import Target

BASELINE = "plain"


@dataclass
class RunRecord:
    suite: str
    prompt_id: str
    method: str
    repeat: int
    tokens: list[int]
    seconds: float
    stats: GenerationStats | None = None


@dataclass
class MethodSummary:
    suite: str
    method: str
    prompts: int
    new_tokens: int
    tau: float | None
    acceptance_by_position: list[float]
    tok_s_median: float
    tok_s_min: float
    tok_s_max: float
    speedup_median: float | None
    identical: int | None  # prompts whose greedy output equals its engine's plain (None when sampling)
    calibration: list[dict] = field(default_factory=list)  # confidence heads: ECE/AUROC per position
    # where a round's time goes (engine methods only): pooled over every round of every repeat
    rounds: int | None = None
    draft_ms: float | None = None
    verify_ms: float | None = None
    # the speedup with the same acceptance if drafting cost nothing (each round's measured drafting
    # time taken out), median over repeats: how much of the gap to an ideal drafter is drafting cost
    speedup_free_drafting: float | None = None
    # llama.cpp peers: prompts whose output equals our engine's plain decoding (its Q4 kernels round
    # differently, so this is an agreement rate, not a losslessness check), and the run they are timed
    # and checked against
    same_as_plain: int | None = None
    baseline: str = BASELINE
    # accepted length per round that drafted (vLLM's and llama.cpp's count: rounds with no proposal,
    # frequent for n-gram, left out); tau above is per target step
    tau_drafted: float | None = None


@dataclass
class BenchResult:
    config: dict
    machine: dict
    summaries: list[MethodSummary] = field(default_factory=list)
    records: list[RunRecord] = field(default_factory=list)

    def to_json(self) -> dict:
        def record(r: RunRecord) -> dict:
            d = asdict(r)
            d["stats"] = r.stats.to_dict() if r.stats else None
            return d

        return {
            "config": self.config,
            "machine": self.machine,
            "summaries": [asdict(s) for s in self.summaries],
            "records": [record(r) for r in self.records],
        }


def machine_info(target: Target) -> dict:
    dev = target.device
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "dtype": str(next(target.model.parameters()).dtype).removeprefix("torch."),
        "backend": type(target.runner).__name__,
        "fixed_rows": target.runner.fixed_rows,
        "mixed_shapes": target.runner.mixed_shapes,
    }


def validate_methods(methods: list[str]) -> list[str]:
    known = list(METHODS) + list(PEERS) + list(LLAMACPP_PEERS) + list(VLLM_PEERS)
    bad = [m for m in methods if m not in known and not base_method(m)]
    if bad:
        raise DraftsmithError(f"unknown method(s) {', '.join(bad)}; choose from: {', '.join(known)}")
    if not methods:
        raise DraftsmithError("no methods given")
    # the baseline runs first in the list and is always present: speedups and losslessness need it
    return [BASELINE] + [m for m in dict.fromkeys(methods) if m != BASELINE]


def _fields(options: Any) -> dict[str, str]:
    """A method's decoding options as the results record them (a loaded model by its class name)."""
    values = {f.name: getattr(options, f.name) for f in fields(options)}
    return {k: type(v).__name__ if isinstance(v, torch.nn.Module) else str(v) for k, v in values.items()}


def run_bench(
    target: Target,
    prompts: dict[str, list[Prompt]],
    methods: list[str],
    *,
    repeats: int = 3,
    max_new_tokens: int = 128,
    params: SamplingParams | None = None,
    k: int | None = None,
    drafter_options: Mapping[str, Any] | None = None,
    source: str | None = None,
    progress: bool = True,
    checkpoint: Callable[[BenchResult], None] | None = None,
    peer_logs: str | None = None,
) -> BenchResult:
    """Run every method on every prompt `repeats` times, interleaved; summarise per suite.

    checkpoint: called after each repeat but the last with the result so far (complete repeats
    only, config["repeats_done"]), so a long bench that is stopped keeps what it measured.
    peer_logs: folder for the server logs of llama.cpp and vLLM peers (default: a temporary one).
    drafter_options: option values by name, each method taking its own (`registry.method_options`);
    a value may be per method or variant, {name: value, "*": every method}, as the CLI's flags give."""
    peers: dict = {}
    try:
        return _run_bench(
            target, prompts, methods, repeats, max_new_tokens, params, k, drafter_options, source,
            progress, checkpoint, peer_logs, peers,
        )
    finally:
        for peer in peers.values():
            peer.close()


def _run_bench(
    target, prompts, methods, repeats, max_new_tokens, params, k, drafter_options, source, progress,
    checkpoint, peer_logs, servers,
) -> BenchResult:
    if repeats < 1:
        raise DraftsmithError(f"repeats must be >= 1, got {repeats}")
    params = params or SamplingParams()
    methods = validate_methods(methods)
    drafter_options = drafter_options or {}
    options = {name: method_options(name, drafter_options) for name in methods if base_method(name)}
    runners: dict[str, Callable[[list[int], int], tuple[list[int], float, GenerationStats | None]]] = {}
    for name in methods:
        if base_method(name):  # a method, or a variant "METHOD:LABEL" with its own --drafter
            drafter = build_drafter(base_method(name), target, options[name], k=k)

            def ours(ids, rep, drafter=drafter):
                p = (
                    params
                    if params.seed is None
                    else SamplingParams(**{**asdict(params), "seed": params.seed + rep})
                )
                res = speculative_generate(
                    target.runner, drafter, ids, target.stop_rule(max_new_tokens), p, k=k
                )
                return res.tokens, res.stats.total_s, res.stats

            runners[name] = ours
    peer_names = [m for m in methods if m in PEERS]
    if peer_names:
        for name, peer in HFPeer.load(peer_names, target, source).items():
            runners[name] = lambda ids, rep, peer=peer: (*peer.run(ids, max_new_tokens, params), None)
    engine_names = [m for m in methods if m in LLAMACPP_PEERS or m in VLLM_PEERS]
    refused: dict[str, str] = {}
    if engine_names:  # other engines' servers on loopback, each benched against its own plain
        if not params.greedy:
            raise DraftsmithError("llama.cpp and vLLM peers are benched greedy (leave --temperature at 0)")
        import tempfile

        from draftsmith.evaluation.llamacpp_peers import start_peers as start_llamacpp
        from draftsmith.evaluation.vllm_peers import start_peers as start_vllm

        drafters = drafter_options.get("drafter")
        drafters = {m: v for m, v in drafters.items() if m != "*"} if isinstance(drafters, dict) else {}
        logs = Path(peer_logs) if peer_logs else Path(tempfile.mkdtemp(prefix="draftsmith-peers-"))
        threads = torch.get_num_threads()
        llama_names = [m for m in engine_names if m in LLAMACPP_PEERS]
        vllm_names = [m for m in engine_names if m in VLLM_PEERS]
        if llama_names:
            servers.update(start_llamacpp(llama_names, target, drafters, threads, logs))
        if vllm_names:
            started, refused = start_vllm(vllm_names, target, drafters, threads, logs)
            servers.update(started)
        for name, reason in refused.items():  # vLLM cannot run it here: say why, bench the rest
            print(f"bench: {name} skipped: {reason}", file=sys.stderr)
            methods = [m for m in methods if m != name]
    for name, peer in servers.items():
        runners[name] = lambda ids, rep, peer=peer: peer.run(ids, max_new_tokens)

    encoded = {s: [(p, target.encode(p.text, chat=p.chat)) for p in ps] for s, ps in prompts.items()}
    total = sum(len(v) for v in encoded.values()) * repeats * len(methods)
    result = BenchResult(
        config={
            "methods": methods,
            "suites": list(prompts),
            "repeats": repeats,
            "max_new_tokens": max_new_tokens,
            "sampling": asdict(params),
            "k": k,
            "drafter_options": {name: _fields(o) for name, o in options.items() if o is not None},
            "target": target.name,
            "skipped": refused,
        },
        machine=machine_info(target),
    )
    bar = tqdm(total=total, desc="bench", unit="run", disable=not progress)
    # what the rest of the machine took while we timed (llama-server peers count as ours)
    load = OtherLoad(tuple(p.proc.pid for p in servers.values() if hasattr(p, "proc"))).__enter__()
    for rep in range(repeats):
        for suite, items in encoded.items():
            for i, (prompt, ids) in enumerate(items):
                shift = (rep + i) % len(methods)
                for name in methods[shift:] + methods[:shift]:
                    bar.set_postfix_str(f"{suite} {name}")
                    tokens, seconds, stats = runners[name](ids, rep)
                    result.records.append(RunRecord(suite, prompt.id, name, rep, tokens, seconds, stats))
                    bar.update()
        if checkpoint is not None and rep + 1 < repeats:
            done = list(result.records)
            summaries = summarise(done, methods, list(prompts), rep + 1, params.greedy)
            config = result.config | {"repeats_done": rep + 1}
            checkpoint(BenchResult(config, result.machine, summaries, done))
    bar.close()
    load.__exit__(None, None, None)
    result.config["other_load"] = None if load.fraction is None else round(load.fraction, 3)
    result.config["repeats_done"] = repeats
    result.summaries = summarise(result.records, methods, list(prompts), repeats, params.greedy)
    return result


def summarise(
    records: list[RunRecord], methods: list[str], suites: list[str], repeats: int, greedy: bool
) -> list[MethodSummary]:
    out = []
    for suite in suites + (["all"] if len(suites) > 1 else []):
        rows = [r for r in records if suite in ("all", r.suite)]
        by = {(r.method, r.repeat, r.suite, r.prompt_id): r for r in rows}
        for name in methods:
            mine = [r for r in rows if r.method == name]
            tok_s, speed, free = [], [], []
            own = baseline_of(name) if baseline_of(name) in methods else None
            ref = own or BASELINE  # a llama.cpp peer is timed and checked against llama.cpp plain
            for rep in range(repeats):
                reps = [r for r in mine if r.repeat == rep]
                secs = sum(r.seconds for r in reps)
                base = sum(by[(ref, rep, r.suite, r.prompt_id)].seconds for r in reps)
                tok_s.append(sum(len(r.tokens) for r in reps) / secs if secs else 0.0)
                speed.append(base / secs if secs else 0.0)
                if reps and all(r.stats for r in reps):
                    rest = secs - sum(r.stats.draft_s for r in reps)
                    free.append(base / rest if rest > 0 else 0.0)
            pooled = GenerationStats()
            for r in mine:
                if r.stats:
                    pooled.merge(r.stats)
            first = [r for r in mine if r.repeat == 0]
            identical = same_as_plain = None
            if greedy:
                identical = sum(r.tokens == by[(ref, 0, r.suite, r.prompt_id)].tokens for r in first)
                same_as_plain = sum(r.tokens == by[(BASELINE, 0, r.suite, r.prompt_id)].tokens for r in first)
            out.append(
                MethodSummary(
                    suite=suite,
                    method=name,
                    prompts=len(first),
                    new_tokens=sum(len(r.tokens) for r in first),
                    tau=round(pooled.tau, 3) if pooled.rounds and name != BASELINE else None,
                    tau_drafted=(
                        round(1 + pooled.accepted / pooled.drafted_at[0], 3)
                        if pooled.drafted_at and pooled.drafted_at[0]
                        else None
                    ),
                    acceptance_by_position=[round(a, 3) for a in pooled.acceptance_by_position],
                    tok_s_median=round(statistics.median(tok_s), 2),
                    tok_s_min=round(min(tok_s), 2),
                    tok_s_max=round(max(tok_s), 2),
                    speedup_median=None if name == BASELINE else round(statistics.median(speed), 3),
                    identical=identical,
                    same_as_plain=same_as_plain if own or name in ("llamacpp-plain", "vllm-plain") else None,
                    baseline=ref,
                    calibration=by_position(pooled.confidence),
                    rounds=pooled.rounds or None,
                    draft_ms=round(1000 * pooled.draft_s / pooled.rounds, 3) if pooled.rounds else None,
                    verify_ms=round(1000 * pooled.verify_s / pooled.rounds, 3) if pooled.rounds else None,
                    speedup_free_drafting=(
                        round(statistics.median(free), 3) if free and name != BASELINE else None
                    ),
                )
            )
    return out


NOISY_SPREAD = 0.10
"""A method whose tok/s ranged wider than this share of its median over the repeats is flagged: its
speedup moved that much between repeats of the same prompts."""


def noise_notes(result: BenchResult) -> list[str]:
    """What makes this bench's numbers less than they look, one line each, so nobody reads a bare
    speedup off a noisy run: a single repeat, a method whose tok/s spread widely over the repeats,
    other processes busy on the cores while it ran."""
    notes = []
    load = result.config.get("other_load")
    if load is not None and load > OTHER_LOAD_MAX:
        notes.append(
            f"other processes used {100 * load:.0f}% of the CPU while this bench ran: every timing here "
            "is suspect; rerun on an idle machine"
        )
    repeats = result.config.get("repeats_done", result.config.get("repeats", 1))
    if repeats == 1:
        notes.append(
            "one repeat: each speedup is a single measurement (--repeats 2 or more shows its spread)"
        )
    else:
        for s in result.summaries:
            if s.tok_s_median and (s.tok_s_max - s.tok_s_min) > NOISY_SPREAD * s.tok_s_median:
                spread = 100 * (s.tok_s_max - s.tok_s_min) / s.tok_s_median
                notes.append(
                    f"{s.suite} {s.method}: tok/s ranged {s.tok_s_min:.1f}-{s.tok_s_max:.1f} over the "
                    f"repeats ({spread:.0f}% of its median): noisy"
                )
    return notes


def round_cost_table(summaries: list[MethodSummary]) -> str:
    """Drafting and verification time a round per suite and method, and the speedup the same
    acceptance would give with free drafting: whether a method is held back by what it accepts or
    by what its drafts cost (empty when no method ran through the engine)."""
    # a peer whose engine reports no round timings (vLLM) is left out rather than shown as free
    rows = [s for s in summaries if s.rounds and (s.draft_ms or s.verify_ms)]
    if not rows:
        return ""
    lines = [
        "| suite | method | rounds | drafting ms a round | verification ms a round | drafting share "
        "| speedup vs plain | with free drafting |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        busy = (s.draft_ms or 0.0) + (s.verify_ms or 0.0)
        share = f"{100 * s.draft_ms / busy:.0f}%" if busy else "-"
        speed = "1.00x" if s.speedup_median is None else f"{s.speedup_median:.2f}x"
        free = "-" if s.speedup_free_drafting is None else f"{s.speedup_free_drafting:.2f}x"
        lines.append(
            f"| {s.suite} | {s.method} | {s.rounds} | {s.draft_ms:.2f} | {s.verify_ms:.2f} | {share} "
            f"| {speed} | {free} |"
        )
    return "\n".join(lines)


def calibration_table(summaries: list[MethodSummary], positions: int = 4) -> str:
    """Confidence-head quality per suite and draft position (empty when no method has one)."""
    rows = [(s, c) for s in summaries for c in s.calibration[:positions]]
    if not rows:
        return ""
    lines = [
        "| suite | method | position | judged slots | accept rate | mean confidence | ECE | AUROC |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s, c in rows:
        lines.append(
            f"| {s.suite} | {s.method} | {c['position']} | {c['n']} | {c['accept_rate']:.2f} | "
            f"{c['mean_confidence']:.2f} | {c['ece']:.3f} | {c['auroc']:.3f} |"
        )
    return "\n".join(lines)


def markdown_table(summaries: list[MethodSummary], positions: int = 4) -> str:
    """The table docs/BENCHMARKS.md shows. "plain" is each method's own engine's plain decoding: a
    llama.cpp or vLLM peer's speedup and exactness are against llamacpp-plain / vllm-plain; "same as
    our plain" counts the prompts where it writes exactly what our engine does (its kernels round
    differently)."""
    head = [
        "suite",
        "method",
        "tau",
        "tau a drafted round",
        *[f"acc@{i + 1}" for i in range(positions)],
        "tok/s median (min-max)",
        "speedup vs plain",
        "identical to plain",
        "same as our plain",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in summaries:
        acc = [f"{a:.2f}" for a in s.acceptance_by_position[:positions]]
        acc += ["-"] * (positions - len(acc))
        same = (
            "-"
            if s.identical is None
            else ("yes" if s.identical == s.prompts else f"NO ({s.identical}/{s.prompts})")
        )
        cells = [
            s.suite,
            s.method,
            "-" if s.tau is None else f"{s.tau:.2f}",
            "-" if s.tau_drafted is None else f"{s.tau_drafted:.2f}",
            *acc,
            f"{s.tok_s_median:.1f} ({s.tok_s_min:.1f}-{s.tok_s_max:.1f})",
            "1.00x" if s.speedup_median is None else f"{s.speedup_median:.2f}x",
            same,
            "-" if s.same_as_plain is None else f"{s.same_as_plain}/{s.prompts}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
