"""Assemble a plan: plain decode speed, per-method speedup and draft length, the VRAM budget, the
hybrid bound, and a recommendation, every number next to its formula in words."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from draftsmith.errors import DraftsmithError
from draftsmith.planning import cost, vram
from draftsmith.planning.acceptance import TASKS, Acceptance, typical
from draftsmith.planning.bench_file import BenchFile
from draftsmith.planning.hardware import GIB, CpuMemory, Hardware, Pcie
from draftsmith.planning.hybrid import ARTICLE_PCIE_BYTES_PER_TOKEN, HybridBound, bound
from draftsmith.planning.methods import METHODS, DrafterCost, drafter_cost
from draftsmith.planning.model_spec import ModelSpec
from draftsmith.planning.steps import MeasuredSteps, RooflineSteps

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

    def to_json(self) -> dict:
        return {
            "method": self.method,
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
    "verify_ms": "target step over k + 1 tokens per sequence",
    "speedup": "S = E x T(1) / (drafting time + T_verify(k+1)), rounds without a draft verify 1 token",
    "tok_s": "per-user tokens per second: S / T(1)",
}


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
    hybrid: HybridBound | None = None
    recommendation: str = ""
    notes: list[str] = field(default_factory=list)

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
            "vram_formula": "weights (params x bits / 8) + target KV at context x concurrency + drafter "
            "weights + drafter KV + verification KV (k extra positions per sequence), against 90% of VRAM",
            "hybrid": self.hybrid.to_json() if self.hybrid else None,
            "recommendation": self.recommendation,
            "notes": self.notes,
        }


def _check_workload(context: int, answer_len: int, concurrency: int) -> None:
    bad = [
        f"{flag} must be a positive whole number, got {v!r}"
        for flag, v in (("--context", context), ("--answer-len", answer_len), ("--concurrency", concurrency))
        if not isinstance(v, int) or v < 1
    ]
    if bad:
        raise DraftsmithError("; ".join(bad))


def build(
    spec: ModelSpec,
    hw: Hardware | None = None,
    measured: MeasuredSteps | None = None,
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
) -> Plan:
    """The whole plan for one machine, model and workload."""
    _check_workload(context, answer_len, concurrency)
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
    mean_ctx = context + answer_len / 2
    notes: list[str] = []
    if spec.max_context and context + answer_len > spec.max_context:
        notes.append(
            f"context + answer ({context + answer_len}) exceeds the model's {spec.max_context} positions"
        )
    steps = measured or RooflineSteps(hw, spec, mean_ctx, concurrency)
    t1 = steps.target(1)
    plain = _plain_quantities(spec, hw, steps, concurrency, answer_len, mean_ctx)
    draft_length, table, tile_cap = _draft_length(spec, hw, steps, concurrency, mean_ctx)
    rows = _method_rows(spec, steps, t1, tile_cap, methods, tasks, bench, draft_model)
    plan = Plan(
        hardware=hw.to_json() if hw else {"name": "this machine (measured)", "kind": "measured"},
        model=spec.to_json(),
        workload={
            "context": context,
            "answer_len": answer_len,
            "concurrency": concurrency,
            "mean_kv": mean_ctx,
        },
        steps=steps.how,
        plain=plain,
        draft_length=draft_length,
        concurrency=table,
        methods=rows,
        notes=notes,
    )
    if hw is not None and hw.vram_gb:
        plan.vram = _vram(spec, hw, context + answer_len, concurrency, rows)
        if plan.vram[0].verdict != vram.SWITCH_ON or cpu is not None:
            kv = spec.kv_bytes_per_token() * (context + answer_len) * concurrency
            plan.hybrid = bound(spec, hw, cpu, link or Pcie(4, 16), kv, pcie_bytes_per_token)
    if any(not m.acceptance.measured for m in rows):
        notes.append(
            "acceptance: typical values, not measured (sources per row); run `draftsmith bench` on your "
            "prompts and re-plan with --bench FILE"
        )
    if hw is not None and hw.kind != "custom":
        notes.append(
            "speeds are roofline ceilings at the spec sheet's bandwidth; real kernels reach ~70-90% of it "
            "(CPUs 60-85%), so speedups (ratios) hold better than absolute tok/s"
        )
    plan.recommendation = recommend(plan, t1)
    return plan


def _plain_quantities(spec, hw, steps, batch, answer_len, mean_ctx) -> list[Quantity]:
    t1 = steps.target(1)
    q: list[Quantity] = []
    if isinstance(steps, RooflineSteps):
        kv = steps.kv_per_seq
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
                "2 x layers x (context + answer/2) x KV heads x head dim x 2 bytes",
            ),
            Quantity(
                "memory time",
                1000 * (spec.read_bytes + batch * kv) / hw.bandwidth,
                "ms",
                "(weights + B x KV) / bandwidth",
            ),
        ]
        if hw.flops:
            q.append(
                Quantity(
                    "compute time",
                    1000 * 2 * spec.active_params * batch / hw.flops,
                    "ms",
                    "2 x active params x B / FLOP/s",
                )
            )
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
    """Tile rule, attention share, ridge point and the free draft length as concurrency grows."""
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
                else "no: weights dominate, the ridge point governs",
                "",
                "attention share > 0.5",
            ),
        ]
        for b in CONCURRENCY_STEPS:
            ridge = (
                cost.ridge_tokens(spec.read_bytes, kv, b, spec.active_params, hw.bandwidth, hw.flops)
                if hw.flops
                else None
            )
            table.append(
                {"concurrency": b, "ridge_tokens": ridge, "free_k": cost.free_draft_length(tile, ridge, b)}
            )
        if hw.flops:
            ridge = cost.ridge_tokens(spec.read_bytes, kv, batch, spec.active_params, hw.bandwidth, hw.flops)
            q += [
                Quantity(
                    "ridge point", ridge, "tokens per step", "memory time x FLOP/s / (2 x active params)"
                ),
                Quantity(
                    "free draft length at this concurrency",
                    cost.free_draft_length(tile, ridge, batch),
                    "drafts",
                    "min(tile rule k, floor(ridge / B) - 1)",
                ),
            ]
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


def _method_rows(spec, steps, t1, tile_cap, methods, tasks, bench, draft_model) -> list[MethodPlan]:
    pairs: list[tuple[str, Acceptance]] = []
    if bench is not None:
        for row in bench.speculative_rows():
            if methods and row.method not in methods:
                continue
            if row.method not in METHODS and row.method not in COST_OF:
                continue
            pairs.append((row.method, bench.acceptance(row)))
            if isinstance(steps, MeasuredSteps):
                steps.draft_s.setdefault(row.method, row.draft_s_per_round)
                steps.draft_tokens.setdefault(row.method, row.mean_draft)
        if not pairs:
            raise DraftsmithError(f"{bench.path} has no drafting method rows to plan from")
    else:
        for m in methods or list(METHODS):
            for t in tasks or list(TASKS):
                pairs.append((m, typical(m, t)))
    rows = []
    for m, acc in pairs:
        d = drafter_cost(COST_OF.get(m, m), spec, draft_model)
        limit = acc.k_max if tile_cap is None else min(acc.k_max, tile_cap)
        k, e, s = cost.best_draft_length(
            acc.conditional,
            limit,
            t1,
            lambda n, d=d: steps.draft(d, n),
            steps.target,
            draft_rate=acc.draft_rate,
        )
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


def _vram(spec, hw, context, batch, rows) -> list[vram.VramBudget]:
    """The plain budget first, then each method at the longest draft length it would use."""
    out = [vram.budget(spec, hw.vram_gb, context, batch, NO_DRAFTER, 0)]
    for m in dict.fromkeys(r.method for r in rows):
        mine = [r for r in rows if r.method == m]
        out.append(vram.budget(spec, hw.vram_gb, context, batch, mine[0].drafter, max(r.k for r in mine)))
    return out


def _mean_speedup(rows: list[MethodPlan], method: str) -> float:
    mine = [r.speedup for r in rows if r.method == method]
    return sum(mine) / len(mine)


def recommend(plan: Plan, t1: float) -> str:
    """One paragraph in the article's spirit: fit first, then the method that pays, then its limits."""
    budgets = {b.method: b for b in plan.vram}
    base = budgets.get("none")
    parts: list[str] = []
    if base is not None and base.verdict == vram.DONT:
        parts.append(
            f"Don't switch speculation on: the weights alone take {base.weights / GIB:.1f} GiB of "
            f"{base.usable / GIB:.1f} GiB usable VRAM. Use hybrid CPU/GPU offload, where memory channels and "
            "PCIe set the ceiling, not speculation"
        )
        h = plan.hybrid
        if h is not None:
            if h.cpu_tok_s:
                parts.append(
                    f"{h.cpu} memory gives {h.cpu_tok_s[0]:.0f}-{h.cpu_tok_s[1]:.0f} tok/s for the "
                    f"{h.cpu_bytes_per_token / 1e9:.2f} GB of CPU-resident weights each token reads"
                )
            else:
                parts.append("Give --cpu PRESET (DDR generation and channels) for the memory-channel bound")
            parts.append(
                f"{h.link} carries about {h.pcie_rule_tok_s:.0f} tok/s at "
                f"{h.pcie_bytes_per_token / 1e9:.2g} GB of traffic per token "
                f"({h.pcie_rule_planned_tok_s:.0f} planned at 85%)"
            )
        if plan.model.get("experts"):
            parts.append(
                "With experts offloaded, each verified token routes to its own experts, so a verify step "
                "of k+1 tokens reads up to k+1 times the expert bytes: speculation gains less here"
            )
        parts.append("Count your memory channels first")
        return ". ".join(parts) + "."
    by_method = sorted(
        dict.fromkeys(r.method for r in plan.methods), key=lambda m: -_mean_speedup(plan.methods, m)
    )
    best = by_method[0]
    s = _mean_speedup(plan.methods, best)
    mine = [r for r in plan.methods if r.method == best]
    if s < PAYS:
        parts.append(
            f"Speculation does not pay here: the best method, {best}, is predicted at {s:.2f}x "
            f"(a verify step costs {mine[0].verify_ms / mine[0].plain_ms:.2f}x a plain step at its k); "
            "stay with plain decoding"
        )
    else:
        tasks = ", ".join(f"{r.task} {r.speedup:.2f}x at k={r.k}" for r in mine)
        parts.append(
            f"Best: {best} ({tasks}; {mine[0].tok_s:.0f} tok/s per user against {1 / t1:.0f} plain), "
            f"drafting {mine[0].draft_ms:.2f} ms + verifying {mine[0].verify_ms:.2f} ms per round against "
            f"{mine[0].plain_ms:.2f} ms per plain step"
        )
        if best in NEEDS:
            parts.append(f"It {NEEDS[best]}")
        others = [f"{m} {_mean_speedup(plan.methods, m):.2f}x" for m in by_method[1:]]
        if others:
            parts.append("Others, mean over tasks: " + ", ".join(others))
        b = budgets.get(best)
        if b is not None and b.verdict == vram.SWITCH_ON:
            parts.append(
                f"VRAM: {b.total / GIB:.1f} of {b.usable / GIB:.1f} GiB usable with the drafter: switch it on"
            )
        elif b is not None:
            fixes = []
            if b.fits_context >= vram.MIN_USEFUL_CONTEXT:
                fixes.append(f"cut the context to {b.fits_context} tokens")
            if b.fits_bits and b.fits_bits >= vram.MIN_BITS:
                fixes.append(f"store the weights in {b.fits_bits:.1f} bits or fewer")
            fix = " or ".join(fixes) or "see the VRAM budget"
            parts.append(
                f"VRAM: {b.total / GIB:.1f} GiB needed of {b.usable / GIB:.1f} usable with the drafter: "
                f"{b.verdict} ({fix})"
            )
    if plan.concurrency and plan.concurrency[0]["ridge_tokens"] is not None:
        zero = next((c["concurrency"] for c in plan.concurrency if c["free_k"] == 0), None)
        if zero:
            parts.append(
                f"Extra drafts stop being free at about {zero} concurrent users (batch x (k+1) passes "
                "the ridge point)"
            )
    if any(not r.acceptance.measured for r in plan.methods):
        parts.append("Acceptance here is typical, not measured: bench your own prompts before deciding")
    return ". ".join(parts) + "."
