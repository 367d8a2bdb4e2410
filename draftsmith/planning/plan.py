"""Assemble a plan: plain decode speed, per-method speedup and draft length, the VRAM budget, the
offload bound, speedups against concurrency, and a recommendation consistent with all of them (only
methods that fit, that the model can use and the chosen engine runs), every number next to its
formula in words."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from draftsmith.errors import DraftsmithError
from draftsmith.planning import backends, cost, engines, vram
from draftsmith.planning.acceptance import TASKS, Acceptance, given, typical
from draftsmith.planning.bench_file import BenchFile
from draftsmith.planning.hardware import GIB, CpuMemory, Hardware, Pcie
from draftsmith.planning.methods import METHODS, DrafterCost, drafter_cost
from draftsmith.planning.model_spec import ModelSpec
from draftsmith.planning.offload import ARTICLE_PCIE_BYTES_PER_TOKEN, OffloadBound, bound
from draftsmith.planning.steps import CurveSteps, MeasuredSteps, RooflineSteps

CONCURRENCY_STEPS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
NO_DRAFTER = DrafterCost("none", 0, 0, 0, 0, False)
PAYS = 1.05  # a predicted speedup below this is within the model's error: call it "does not pay"
COST_OF = {"hybrid": "dspark"}  # registry methods priced as another method's drafter
NEEDS = {
    "mtp": "needs a model shipped with MTP weights (vendor-trained; not something to bolt on locally)",
    "eagle3": "needs an EAGLE-3 head trained for this target",
    "dflash": "needs a DFlash drafter trained for this target (draftsmith train --method dflash)",
    "dspark": "needs a DSpark drafter trained for this target (draftsmith train --method dspark)",
    "draft-model": "needs a small LM with the same tokenizer",
}
# inputs beyond these are typos, not workloads
MAX_CONTEXT = 10_000_000  # the longest published context windows are ~1-10M tokens
MAX_ANSWER = 1_000_000
MAX_CONCURRENCY = 65_536
CONTEXT_STRETCH = 8  # RoPE scaling rarely stretches a model past this many times its trained positions
KV_BITS = (2.0, 32.0)


@dataclass(frozen=True)
class Quantity:
    """A number in the plan with its unit and its formula in words."""

    name: str
    value: float | int | str | None
    unit: str
    formula: str

    def to_json(self) -> dict:
        v = (
            round(self.value, 4)
            if isinstance(self.value, float) and math.isfinite(self.value)
            else self.value
        )
        return {"name": self.name, "value": v, "unit": self.unit, "formula": self.formula}


@dataclass(frozen=True)
class MethodPlan:
    """One method on one task: best draft length, expected tokens, time split and speedup."""

    method: str
    task: str
    k: int
    k_limit: int
    expected: float
    draft_ms: float
    verify_ms: float
    plain_ms: float
    speedup: float
    tok_s: float
    acceptance: Acceptance
    drafter: DrafterCost
    fits: str | None = None  # the method's own VRAM verdict (None: no VRAM to plan)

    def to_json(self) -> dict:
        return {
            "method": self.method,
            "vram_verdict": self.fits,
            "task": self.task,
            "k": self.k,
            "k_limit": self.k_limit,
            "expected_tokens": round(self.expected, 4),
            "draft_ms": round(self.draft_ms, 4),
            "verify_ms": round(self.verify_ms, 4),
            "plain_ms": round(self.plain_ms, 4),
            "speedup": round(self.speedup, 4),
            "tok_s": round(self.tok_s, 3),
            "acceptance": self.acceptance.to_json(),
            "drafter_gib": round(self.drafter.weight_bytes / GIB, 4),
            "drafter": self.drafter.note,
        }


METHOD_FORMULAS = {
    "k": "the draft length with the highest speedup, scanned from 1 to the curve's length (capped by "
    "the tile rule while attention dominates); 0 = no length pays",
    "expected_tokens": "E = 1 + draft rate x sum over positions i <= k of the prefix survival "
    "(product of conditional acceptances); Leviathan's (1 - a^(k+1)) / (1 - a) for a constant rate a",
    "draft_ms": "drafting time per round: parallel drafters one pass over the block, serial ones k passes",
    "verify_ms": "target step over k + 1 tokens per sequence, priced by the engine's verify-cost curve",
    "speedup": "S = E x T(1) / (drafting time + T_verify(k+1)), rounds without a draft verify 1 token",
    "tok_s": "per-user tokens per second: S / T(1)",
}


VRAM_FORMULA = (
    "weights (params x bits / 8) + target KV at context x concurrency (at the KV cache's bits) + drafter "
    "weights + drafter KV + verification KV (k extra positions per sequence), against 90% of VRAM (the "
    "other 10%: workspace - CUDA context, activations, allocator)"
)


@dataclass
class Plan:
    hardware: dict
    model: dict
    workload: dict
    steps: str
    plain: list[Quantity]
    draft_length: list[Quantity]
    concurrency: list[dict]
    methods: list[MethodPlan]
    vram: list[vram.VramBudget] = field(default_factory=list)
    offload: OffloadBound | None = None
    recommendation: str = ""
    notes: list[str] = field(default_factory=list)
    excluded: dict[str, str] = field(default_factory=dict)  # method -> why it is not listed
    engine: str | None = None  # the engine the user chose (None: any)
    backend: dict | None = None  # the engine/device backend the step costs came from
    recommended: str | None = None  # the method the recommendation names (None: none)

    def to_json(self) -> dict:
        return {
            "hardware": self.hardware,
            "model": self.model,
            "workload": self.workload,
            "steps": self.steps,
            "plain": [q.to_json() for q in self.plain],
            "draft_length": [q.to_json() for q in self.draft_length],
            "concurrency": self.concurrency,
            "methods": [m.to_json() for m in self.methods],
            "method_formulas": METHOD_FORMULAS,
            "vram": [b.to_json() for b in self.vram],
            "vram_formula": VRAM_FORMULA,
            "offload": self.offload.to_json() if self.offload else None,
            "excluded": self.excluded,
            "engine": self.engine,
            "backend": self.backend,
            "recommended": self.recommended,
            "recommendation": self.recommendation,
            "notes": self.notes,
        }


def _check_workload(
    spec: ModelSpec, context: int, answer_len: int, concurrency: int, kv_bits: float
) -> list[str]:
    """One clear error for impossible or absurd workloads; notes for merely unusual ones."""
    bad = [
        f"{flag} must be a positive whole number, got {v!r}"
        for flag, v in (("--context", context), ("--answer-len", answer_len), ("--concurrency", concurrency))
        if not isinstance(v, int) or isinstance(v, bool) or v < 1
    ]
    if bad:
        raise DraftsmithError("; ".join(bad))
    for flag, v, hi in (
        ("--context", context, MAX_CONTEXT),
        ("--answer-len", answer_len, MAX_ANSWER),
        ("--concurrency", concurrency, MAX_CONCURRENCY),
    ):
        if v > hi:
            raise DraftsmithError(f"{flag} {v:,} is outside physical sense (at most {hi:,})")
    if not (isinstance(kv_bits, (int, float)) and KV_BITS[0] <= kv_bits <= KV_BITS[1]):
        raise DraftsmithError(f"--kv-bits must be between {KV_BITS[0]:g} and {KV_BITS[1]:g}, got {kv_bits!r}")
    notes = []
    if spec.max_context and context + answer_len > spec.max_context:
        if context + answer_len > CONTEXT_STRETCH * spec.max_context:
            raise DraftsmithError(
                f"context + answer ({context + answer_len:,}) is over {CONTEXT_STRETCH}x the model's "
                f"{spec.max_context:,} positions: no RoPE scaling stretches it that far"
            )
        notes.append(
            f"context + answer ({context + answer_len}) exceeds the model's {spec.max_context} positions "
            "(needs RoPE scaling)"
        )
    return notes


def build(
    spec: ModelSpec,
    hw: Hardware | None = None,
    measured: MeasuredSteps | CurveSteps | None = None,
    context: int = 4096,
    answer_len: int = 512,
    concurrency: int = 1,
    methods: list[str] | None = None,
    tasks: list[str] | None = None,
    bench: BenchFile | None = None,
    cpu: CpuMemory | None = None,
    link: Pcie | None = None,
    pcie_bytes_per_token: float = ARTICLE_PCIE_BYTES_PER_TOKEN,
    draft_model: ModelSpec | None = None,
    engine: str | None = None,
    kv_bits: float = 16,
    given_tau: tuple[float, int] | None = None,
    acceptances: list[Acceptance] | None = None,
) -> Plan:
    """The whole plan for one machine, model, engine and workload. given_tau: (tau, draft length) of
    a drafter measured elsewhere, which replaces the typical acceptance of each method planned;
    acceptances: a drafter's own measured curves (`plan --drafter`), planned instead of any other."""
    notes = _check_workload(spec, context, answer_len, concurrency, kv_bits)
    if hw is None and measured is None:
        raise DraftsmithError("no hardware: give a preset, explicit numbers or --measure")
    unknown = [m for m in methods or [] if m not in METHODS and m not in COST_OF]
    if unknown:
        raise DraftsmithError(f"unknown method(s) {', '.join(unknown)}; known: {', '.join(METHODS)}")
    bad_tasks = [t for t in tasks or [] if t not in TASKS]
    if bad_tasks:
        raise DraftsmithError(f"unknown task(s) {', '.join(bad_tasks)}; known: {', '.join(TASKS)}")
    if measured is not None and concurrency != 1:
        raise DraftsmithError("--measure times this machine's batch-1 engine; drop --concurrency")
    if engine is not None:
        engine = engines.engine_key(engine)
    if isinstance(measured, MeasuredSteps):
        engine = "draftsmith"
    elif isinstance(measured, CurveSteps):
        engine = "llamacpp"
    device = hw.kind if hw is not None else "cpu"
    backend = None
    if hw is not None:
        if engine and device != "custom" and device not in engines.ENGINES[engine].devices:
            raise DraftsmithError(
                f"{engines.ENGINES[engine].name} does not run on {device}; "
                f"engines that do: {', '.join(k for k, e in engines.ENGINES.items() if device in e.devices)}"
            )
        backend = backends.backend(engine or backends.default_engine(hw.kind, spec.bits), hw.kind, spec.bits)
    excluded = _excluded(spec, engine, methods, bench)
    mean_ctx = context + answer_len / 2
    steps = measured or RooflineSteps(hw, spec, mean_ctx, concurrency, kv_bits, backend)
    t1 = steps.target(1)
    plain = _plain_quantities(spec, hw, steps, concurrency, answer_len, mean_ctx)
    draft_length, table, tile_cap = _draft_length(spec, hw, steps, concurrency, mean_ctx)
    if given_tau is not None:
        tau, k = given_tau
        if bench is not None or not methods:
            raise DraftsmithError(
                "--tau/--draft-len describe one drafter: name its --method, without --bench"
            )
        if not (k >= 1 and 1 <= tau <= k + 1):
            raise DraftsmithError(
                f"--tau must be in [1, draft length + 1] = [1, {k + 1}] at --draft-len {k}, got {tau}"
            )
    rows = _method_rows(
        spec,
        steps,
        t1,
        tile_cap,
        methods,
        tasks,
        bench,
        draft_model,
        excluded,
        kv_bits,
        given_tau,
        acceptances,
    )
    plan = Plan(
        hardware=hw.to_json() if hw else {"name": "this machine (measured)", "kind": "measured"},
        model=spec.to_json(),
        workload={
            "context": context,
            "answer_len": answer_len,
            "concurrency": concurrency,
            "mean_kv": mean_ctx,
            "kv_bits": kv_bits,
        },
        steps=steps.how,
        plain=plain,
        draft_length=draft_length,
        concurrency=table,
        methods=rows,
        notes=notes,
        excluded=excluded,
        engine=engine,
        backend=backend.to_json() if backend else None,
    )
    if hw is not None and hw.vram_gb:
        plan.vram = _vram(spec, hw, context + answer_len, concurrency, rows, kv_bits)
        fits = {b.method: b.verdict for b in plan.vram}
        plan.methods = [_with_fit(r, fits.get(r.method)) for r in rows]
        if plan.vram[0].verdict != vram.SWITCH_ON or cpu is not None:
            kv = spec.kv_bytes_per_token(kv_bits) * (context + answer_len) * concurrency
            plan.offload = bound(
                spec,
                hw,
                cpu,
                link or Pcie(4, 16),
                kv,
                pcie_bytes_per_token,
                gpu_efficiency=backend.efficiency if backend else 1.0,
                expert_efficiency=backend.expert_efficiency if backend else 1.0,
            )
    if isinstance(steps, RooflineSteps):
        _concurrency_speedups(plan, steps)
    if any(not m.acceptance.measured for m in rows):
        notes.append(
            "acceptance: typical values, not measured (sources per row); run `draftsmith bench` on your "
            "prompts and re-plan with --bench FILE"
        )
    if backend is not None:
        lo, hi = backend.spread
        notes.append(
            f"speeds use {backend.key}'s achievable bandwidth, {backend.efficiency:.0%} of the spec sheet's "
            f"({backend.efficiency_source}); published single-stream cases span {lo:.0%}-{hi:.0%}, so "
            "absolute tok/s carry that spread while speedups (ratios) hold better"
        )
    if excluded:
        notes.append("not listed: " + "; ".join(f"{m} ({why})" for m, why in excluded.items()))
    plan.recommendation = recommend(plan, t1)
    return plan


def _excluded(spec: ModelSpec, engine: str | None, asked: list[str] | None, bench) -> dict[str, str]:
    """Methods the model cannot use or the chosen engine cannot run, with the reason; asking for one
    of them by name is an error."""
    out: dict[str, str] = {}
    candidates = list(METHODS) + list(COST_OF)
    if bench is not None:
        candidates += [r.method for r in bench.speculative_rows()]
    for m in dict.fromkeys(candidates):
        if m == "mtp" and not spec.has_mtp:
            out[m] = "the model ships no MTP layers"
        elif engine is not None and not engines.ENGINES[engine].runs(m):
            out[m] = f"{engines.ENGINES[engine].name} {engines.ENGINES[engine].version} does not run it"
    refused = [m for m in asked or [] if m in out]
    if refused:
        raise DraftsmithError("; ".join(f"--method {m}: {out[m]}" for m in refused))
    return out


def _with_fit(row: MethodPlan, verdict: str | None) -> MethodPlan:
    from dataclasses import replace

    return replace(row, fits=verdict)


def _plain_quantities(spec, hw, steps, batch, answer_len, mean_ctx) -> list[Quantity]:
    t1 = steps.target(1)
    q: list[Quantity] = []
    if isinstance(steps, RooflineSteps):
        kv = steps.kv_per_seq
        eff = steps.efficiency
        q += [
            Quantity(
                "weights read per step",
                spec.read_bytes / GIB,
                "GiB",
                "active params (less an untied input embedding) x bits / 8",
            ),
            Quantity(
                "KV read per sequence",
                kv / GIB,
                "GiB",
                f"2 x layers x (context + answer/2) x KV heads x head dim x {steps.kv_bits:g} bits / 8",
            ),
            Quantity(
                "achievable bandwidth",
                steps.bandwidth / 1e9,
                "GB/s",
                f"spec sheet x {eff:.0%} ({steps.backend.key if steps.backend else 'no backend'})",
            ),
            Quantity(
                "memory time",
                1000 * (steps.weight_time(batch) + batch * kv / steps.bandwidth),
                "ms",
                "weights / achievable bandwidth x r(B) (MoE: routed experts at the expert efficiency) "
                "+ B x KV / achievable bandwidth",
            ),
        ]
        if steps.flops:
            q.append(
                Quantity(
                    "compute time",
                    1000 * 2 * spec.active_params * batch / steps.flops,
                    "ms",
                    "2 x active params x B / achievable FLOP/s",
                )
            )
    elif isinstance(steps, CurveSteps):
        q.append(Quantity("llama.cpp 1-token step", 1000 * steps.one_s, "ms", steps.curve.source))
    else:
        q += [
            Quantity(
                "calibrated 1-token step",
                1000 * (t1 - steps.overhead_s),
                "ms",
                "draftsmith calibrate's table",
            ),
            Quantity(
                "fixed step shape", steps.fixed_rows, "rows", "steps of up to this many tokens cost the same"
            ),
            Quantity(
                "engine overhead", 1000 * steps.overhead_s, "ms/round", "short plain decode minus the table"
            ),
        ]
    q += [
        Quantity("plain step T(1)", 1000 * t1, "ms", steps.how),
        Quantity("plain decode", 1 / t1, "tok/s per user", "1 / T(1)"),
        Quantity("plain decode, all users", batch / t1, "tok/s", "B / T(1)"),
        Quantity("one answer, plain", answer_len * t1, "s", "answer length x T(1)"),
    ]
    return q


def _draft_length(spec, hw, steps, batch, mean_ctx) -> tuple[list[Quantity], list[dict], int | None]:
    """Tile rule, attention share, ridge point, the verify-cost curve, and the free draft length as
    concurrency grows."""
    g = spec.group
    tile = cost.tile_k_max(g)
    q = [
        Quantity("G", g, "query heads per KV head", "attention heads / KV heads"),
        Quantity(
            "tile rule k_max", tile, "drafts", "floor(128 / G) - 1: G x (k+1) rows fill one 128-row MMA tile"
        ),
    ]
    table: list[dict] = []
    cap = None
    if isinstance(steps, RooflineSteps):
        kv = steps.kv_per_seq
        share = batch * kv / (spec.read_bytes + batch * kv)
        dominated = share > 0.5
        cap = tile if dominated else None
        q += [
            Quantity("attention share of bytes", share, "", "B x KV / (weights + B x KV)"),
            Quantity(
                "attention dominates",
                "yes: draft length capped by the tile rule"
                if dominated
                else "no: weights dominate, the verify-cost curve and ridge point govern",
                "",
                "attention share > 0.5",
            ),
        ]
        for n in (2, 4, 8):
            q.append(
                Quantity(
                    f"verify step T({n}) / T(1)",
                    steps.target(n) / steps.target(1),
                    "",
                    _curve_label(steps),
                )
            )
        flops = steps.flops
        for b in CONCURRENCY_STEPS:
            ridge = (
                cost.ridge_tokens(spec.read_bytes, kv, b, spec.active_params, steps.bandwidth, flops)
                if flops
                else None
            )
            table.append(
                {"concurrency": b, "ridge_tokens": ridge, "free_k": cost.free_draft_length(tile, ridge, b)}
            )
        if flops:
            ridge = cost.ridge_tokens(spec.read_bytes, kv, batch, spec.active_params, steps.bandwidth, flops)
            q += [
                Quantity(
                    "ridge point",
                    ridge,
                    "tokens per step",
                    "memory time x achievable FLOP/s / (2 x active params)",
                ),
                Quantity(
                    "free draft length at this concurrency",
                    cost.free_draft_length(tile, ridge, batch),
                    "drafts",
                    "min(tile rule k, floor(ridge / B) - 1)",
                ),
            ]
    elif isinstance(steps, CurveSteps):
        for n in (2, 4, 8):
            q.append(Quantity(f"verify step T({n}) / T(1)", steps.curve.at(n), "", steps.curve.source))
    else:
        one = steps.table[1]
        cheap = max((n for n, t in steps.table.items() if t <= 1.1 * one), default=1)
        q.append(
            Quantity(
                "free draft length on this machine",
                cheap - 1,
                "drafts",
                "largest n with a measured n-token step <= 1.1 x the 1-token step, minus 1",
            )
        )
    return q, table, cap


def _curve_label(steps: RooflineSteps) -> str:
    b = steps.backend
    if b is None:
        return "the spec sheet's roofline"
    if b.curve is not None:
        return f"{b.key}'s verify-cost curve at B x n rows ({b.curve.source})"
    return f"{b.key}: load + compute at {b.compute_efficiency:.0%} of peak FLOP/s"


def _acceptances(
    methods, tasks, bench, steps, excluded, given_tau=None, acceptances=None
) -> list[tuple[str, Acceptance]]:
    pairs: list[tuple[str, Acceptance]] = []
    if acceptances is not None:
        return [(a.method, a) for a in acceptances if a.method not in excluded]
    if given_tau is not None:
        return [(m, given(m, t, *given_tau)) for m in methods if m not in excluded for t in tasks or TASKS]
    if bench is not None:
        for row in bench.speculative_rows():
            if methods and row.method not in methods:
                continue
            if row.method not in METHODS and row.method not in COST_OF or row.method in excluded:
                continue
            pairs.append((row.method, bench.acceptance(row)))
            if isinstance(steps, MeasuredSteps):
                steps.draft_s.setdefault(row.method, row.draft_s_per_round)
                steps.draft_tokens.setdefault(row.method, row.mean_draft)
        if not pairs:
            raise DraftsmithError(f"{bench.path} has no drafting method rows to plan from")
    else:
        for m in methods or [m for m in METHODS if m not in excluded]:
            for t in tasks or list(TASKS):
                pairs.append((m, typical(m, t)))
    return pairs


def _best(acc: Acceptance, d: DrafterCost, steps, limit: int, batch: int | None = None):
    """(k, E, speedup, t1) of the best draft length at a concurrency (the plan's when None)."""
    t1 = steps.target(1, batch)
    k, e, s = cost.best_draft_length(
        acc.conditional,
        limit,
        t1,
        lambda n: steps.draft(d, n, batch),
        lambda n: steps.target(n, batch),
        draft_rate=acc.draft_rate,
    )
    return k, e, s, t1


def _method_rows(
    spec,
    steps,
    t1,
    tile_cap,
    methods,
    tasks,
    bench,
    draft_model,
    excluded,
    kv_bits,
    given_tau=None,
    given=None,
) -> list[MethodPlan]:
    rows = []
    for m, acc in _acceptances(methods, tasks, bench, steps, excluded, given_tau, given):
        d = drafter_cost(COST_OF.get(m, m), spec, draft_model, kv_bits)
        limit = acc.k_max if tile_cap is None else min(acc.k_max, tile_cap)
        k, e, s, _ = _best(acc, d, steps, limit)
        rows.append(
            MethodPlan(
                m,
                acc.task,
                k,
                limit,
                e,
                1000 * steps.draft(d, k),
                1000 * steps.target(k + 1),
                1000 * t1,
                s,
                s / t1,
                acc,
                d,
            )
        )
    return rows


def _vram(spec, hw, context, batch, rows, kv_bits=16) -> list[vram.VramBudget]:
    """The plain budget first, then each method at the longest draft length it would use."""
    out = [vram.budget(spec, hw.vram_gb, context, batch, NO_DRAFTER, 0, kv_bits)]
    for m in dict.fromkeys(r.method for r in rows):
        mine = [r for r in rows if r.method == m]
        out.append(
            vram.budget(spec, hw.vram_gb, context, batch, mine[0].drafter, max(r.k for r in mine), kv_bits)
        )
    return out


def _concurrency_speedups(plan: Plan, steps: RooflineSteps) -> None:
    """Per concurrency step: total plain tok/s and, for each method that fits, its mean speedup over the
    tasks at its best k there (verify steps of B x (k+1) rows priced by the backend's curve and the
    roofline), and whether its VRAM budget still fits at that many sequences."""
    fitting = [m for m in dict.fromkeys(r.method for r in plan.methods) if _usable(plan, m)]
    hw, spec = steps.hw, steps.spec
    context = plan.workload["context"] + plan.workload["answer_len"]
    for row in plan.concurrency:
        b = row["concurrency"]
        row["plain_tok_s"] = b / steps.target(1, b)
        row["speedup"] = {}
        for m in fitting:
            mine = [r for r in plan.methods if r.method == m]
            got = [_best(r.acceptance, r.drafter, steps, r.k_limit, b) for r in mine]
            row["speedup"][m] = sum(g[2] for g in got) / len(got)
        if hw.vram_gb:
            kv_bits = plan.workload["kv_bits"]
            row["plain_fits"] = (
                vram.budget(spec, hw.vram_gb, context, b, NO_DRAFTER, 0, kv_bits).verdict == vram.SWITCH_ON
            )


def _mean_speedup(rows: list[MethodPlan], method: str) -> float:
    mine = [r.speedup for r in rows if r.method == method]
    return sum(mine) / len(mine)


def _usable(plan: Plan, method: str) -> bool:
    """A method the recommendation may name: its own VRAM verdict is 'switch it on' (or there is no
    VRAM to plan: CPU and measured plans)."""
    verdicts = {b.method: b.verdict for b in plan.vram}
    return method not in verdicts or verdicts[method] == vram.SWITCH_ON


def _fix(b: vram.VramBudget) -> str:
    fixes = []
    if b.fits_context >= vram.MIN_USEFUL_CONTEXT:
        fixes.append(f"cut the context to {b.fits_context} tokens")
    if b.fits_bits and b.fits_bits >= vram.MIN_BITS:
        fixes.append(f"store the weights in {b.fits_bits:.1f} bits or fewer")
    return " or ".join(fixes) or "a card with more memory"


def recommend(plan: Plan, t1: float) -> str:
    """One paragraph in the article's spirit: fit first, then the fastest method that fits (with where to
    deploy it), what the faster ones that do not fit would need, and where concurrency ends the gain."""
    budgets = {b.method: b for b in plan.vram}
    base = budgets.get("none")
    parts: list[str] = []
    device = plan.hardware.get("kind")
    if base is not None and base.verdict == vram.DONT:
        plan.recommended = None
        parts.append(
            f"Don't switch speculation on: the weights alone take {base.weights / GIB:.1f} GiB of "
            f"{base.usable / GIB:.1f} GiB usable VRAM. Offload weights to the CPU, where memory channels set "
            "the ceiling, not speculation"
        )
        h = plan.offload
        if h is not None:
            if h.combined_tok_s:
                parts.append(
                    f"With the CPU computing its {h.offloaded_bytes / GIB:.1f} GiB ({h.cpu} memory, "
                    f"{h.cpu_bytes_per_token / 1e9:.2f} GB read per token) expect about "
                    f"{h.combined_tok_s:.0f} tok/s (llama.cpp -ngl / --n-cpu-moe: only activations cross "
                    f"{h.link}); streaming the same bytes over the link instead gives {h.streamed_tok_s:.0f}"
                )
            else:
                parts.append("Give --cpu PRESET (DDR generation and channels) for the memory-channel bound")
        if plan.model.get("experts"):
            parts.append(
                "With experts offloaded, each verified token routes to its own experts, so a verify step "
                "of k+1 tokens reads up to k+1 times the expert bytes: speculation gains less here"
            )
        parts.append("Count your memory channels first")
        return ". ".join(parts) + "."
    if base is not None and base.verdict == vram.CUT_FIRST:
        parts.append(
            f"The model alone needs {base.total / GIB:.1f} of {base.usable / GIB:.1f} GiB usable at this "
            f"context: {_fix(base)} before anything else"
        )
    ranked = sorted(
        dict.fromkeys(r.method for r in plan.methods), key=lambda m: -_mean_speedup(plan.methods, m)
    )
    fitting = [m for m in ranked if _usable(plan, m)]
    if not fitting:
        plan.recommended = None
        if ranked:
            best = ranked[0]
            b = budgets[best]
            parts.append(
                f"Nothing fits as asked: the fastest, {best} ({_mean_speedup(plan.methods, best):.2f}x), "
                f"needs "
                f"{b.total / GIB:.1f} of {b.usable / GIB:.1f} GiB usable with its drafter; {_fix(b)}, "
                "or stay with plain decoding"
            )
        else:
            parts.append("No method left to plan (see the notes for what was excluded)")
        return ". ".join(parts) + "."
    best = fitting[0]
    s = _mean_speedup(plan.methods, best)
    mine = [r for r in plan.methods if r.method == best]
    if s < PAYS:
        plan.recommended = None
        parts.append(
            f"Speculation does not pay here: the best method that fits, {best}, is predicted at {s:.2f}x "
            f"(a verify step costs {mine[0].verify_ms / mine[0].plain_ms:.2f}x a plain step at its k); "
            "stay with plain decoding"
        )
    else:
        plan.recommended = best
        tasks = ", ".join(f"{r.task} {r.speedup:.2f}x at k={r.k}" for r in mine)
        parts.append(
            f"Best that fits: {best} ({tasks}; {mine[0].tok_s:.0f} tok/s per user against "
            f"{1 / t1:.0f} plain), "
            f"drafting {mine[0].draft_ms:.2f} ms + verifying {mine[0].verify_ms:.2f} ms per round against "
            f"{mine[0].plain_ms:.2f} ms per plain step"
        )
        if best in NEEDS:
            parts.append(f"It {NEEDS[best]}")
        b = budgets.get(best)
        if b is not None:
            parts.append(
                f"VRAM: {b.total / GIB:.1f} of {b.usable / GIB:.1f} GiB usable with the drafter: switch it on"
            )
        line = engines.deploy_line(best, plan.engine, device if device in ("gpu", "cpu", "apple") else None)
        if line:
            parts.append("Deploy with: " + line)
    others = [f"{m} {_mean_speedup(plan.methods, m):.2f}x" for m in fitting[1:]]
    if others:
        parts.append("Others that fit, mean over tasks: " + ", ".join(others))
    faster = [m for m in ranked[: ranked.index(best)] if m not in fitting]
    for m in faster:
        b = budgets[m]
        parts.append(
            f"{m} would give {_mean_speedup(plan.methods, m):.2f}x but does not fit "
            f"({b.total / GIB:.1f} of {b.usable / GIB:.1f} GiB usable): {_fix(b)} to use it"
        )
    if plan.recommended and plan.concurrency and "speedup" in plan.concurrency[0]:
        stop = next((c["concurrency"] for c in plan.concurrency if c["speedup"].get(best, 0) < PAYS), None)
        if stop:
            parts.append(
                f"{best} stops paying at about {stop} concurrent sequences (verify steps of B x (k+1) rows "
                "cost more as the batch fills the GPU)"
            )
    if any(not r.acceptance.measured for r in plan.methods):
        parts.append("Acceptance here is typical, not measured: bench your own prompts before deciding")
    return ". ".join(parts) + "."
