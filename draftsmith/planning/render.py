"""A plan as markdown: one table per section, each number beside its formula in words."""

from __future__ import annotations

import math

from draftsmith.planning.hardware import GIB
from draftsmith.planning.plan import METHOD_FORMULAS, Plan, Quantity
from draftsmith.planning.vram import DONT


def _fmt(v) -> str:
    if isinstance(v, float):
        if not math.isfinite(v):
            return "unbounded"
        return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"
    return "-" if v is None else str(v)


def _quantities(rows: list[Quantity]) -> list[str]:
    out = ["| quantity | value | unit | formula |", "|---|---|---|---|"]
    out += [f"| {q.name} | {_fmt(q.value)} | {q.unit} | {q.formula} |" for q in rows]
    return out


def markdown(plan: Plan) -> str:
    hw, m, w = plan.hardware, plan.model, plan.workload
    lines = [
        f"# Plan: {m['name']} on {hw['name']}",
        "",
        f"Model: {m['params'] / 1e9:.3g}B params ({m['active_params'] / 1e9:.3g}B active), "
        f"{m['layers']} layers, hidden {m['hidden']}, {m['heads']} heads / {m['kv_heads']} KV heads "
        f"(G={m['group']}), head dim {m['head_dim']}, vocab {m['vocab']}, {m['bits']:.3g} bits per weight "
        f"({m['weight_gib']:.2f} GiB).",
        f"Hardware: {_hardware_line(hw)}.",
        f"Workload: context {w['context']}, answer {w['answer_len']} tokens, concurrency {w['concurrency']}.",
        "",
        "## Plain decode",
        "",
        *_quantities(plan.plain),
        "",
        "## Draft length",
        "",
        *_quantities(plan.draft_length),
    ]
    if plan.concurrency:
        lines += ["", "| concurrency B | ridge point (tokens/step) | free draft length |", "|---|---|---|"]
        lines += [
            f"| {c['concurrency']} | {_fmt(c['ridge_tokens'])} | {c['free_k']} |" for c in plan.concurrency
        ]
    lines += ["", "## Methods", ""]
    if plan.vram and plan.vram[0].verdict == DONT:
        lines += ["The model does not fit on the device (see the VRAM budget): these rows assume it did.", ""]
    lines += _methods(plan)
    if plan.vram:
        lines += ["", "## VRAM budget", "", *_vram(plan)]
    if plan.hybrid:
        lines += ["", "## Hybrid CPU/GPU bound", "", *_hybrid(plan)]
    lines += ["", "## Recommendation", "", plan.recommendation]
    if plan.notes:
        lines += ["", *[f"- {n}" for n in plan.notes]]
    return "\n".join(lines) + "\n"


def _hardware_line(hw: dict) -> str:
    if hw.get("kind") == "measured":
        return "this machine, measured step costs"
    parts = [hw["name"], f"{hw['bandwidth_gbs']:g} GB/s"]
    if hw.get("tflops"):
        parts.append(f"{hw['tflops']:g} TFLOPS")
    if hw.get("vram_gib"):
        parts.append(f"{hw['vram_gib']:g} GiB")
    return ", ".join(parts) + f" ({hw['source']})"


def _methods(plan: Plan) -> list[str]:
    sources: dict[str, int] = {}
    out = [
        "| method | task | k | E tokens/round | draft ms | verify ms | plain ms | speedup | tok/s per user "
        "| acceptance |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in plan.methods:
        n = sources.setdefault(r.acceptance.source, len(sources) + 1)
        label = "measured" if r.acceptance.measured else "typical, not measured"
        out.append(
            f"| {r.method} | {r.task} | {r.k} | {r.expected:.2f} | {r.draft_ms:.3g} | {r.verify_ms:.3g} "
            f"| {r.plain_ms:.3g} | {r.speedup:.2f}x | {r.tok_s:.3g} | {label} [{n}] |"
        )
    out += ["", *[f"- {k}: {v}" for k, v in METHOD_FORMULAS.items()]]
    out += [f"- [{n}] {s}" for s, n in sources.items()]
    drafters = {r.method: r.drafter.note for r in plan.methods if r.drafter.note}
    out += [f"- drafter {m}: {note}" for m, note in drafters.items()]
    return out


def _vram(plan: Plan) -> list[str]:
    out = [
        "| with | weights | KV | drafter | drafter KV | verify KV | total | usable | fits context "
        "| verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for b in plan.vram:
        gib = [b.weights, b.kv, b.drafter_weights, b.drafter_kv, b.verify_kv, b.total, b.usable]
        cells = " | ".join(f"{x / GIB:.2f}" for x in gib)
        out.append(f"| {b.method} | {cells} | {b.fits_context} | {b.verdict} |")
    out += [
        "",
        "GiB. Total = weights (params x bits / 8) + target KV at (context + answer) x concurrency + drafter "
        "weights + drafter KV + verification KV (k extra positions per sequence); usable = 90% of VRAM. "
        "Fits context: the longest context at which target and drafter fit.",
    ]
    return out


def _hybrid(plan: Plan) -> list[str]:
    h = plan.hybrid
    rows = [
        Quantity("weights offloaded to CPU", h.offloaded_bytes / GIB, "GiB", "weights - (90% of VRAM - KV)"),
        Quantity(
            "CPU-resident bytes per token",
            h.cpu_bytes_per_token / 1e9,
            "GB",
            "offloaded experts x routed share (experts per token / experts) + offloaded dense weights",
        ),
    ]
    if h.cpu_tok_s:
        rows.append(
            Quantity(
                f"memory-channel bound ({h.cpu})",
                f"{h.cpu_tok_s[0]:.1f}-{h.cpu_tok_s[1]:.1f}",
                "tok/s",
                "60-85% x channels x GB/s per channel / CPU-resident bytes per token",
            )
        )
    rows += [
        Quantity(
            f"PCIe bound, article's rule ({h.link})",
            h.pcie_rule_tok_s,
            "tok/s",
            f"link GB/s per direction / {h.pcie_bytes_per_token / 1e9:g} GB per token (the article: 0.5 GB, "
            "so PCIe 3.0 x16 ~ 32 tok/s)",
        ),
        Quantity("PCIe bound, planned", h.pcie_rule_planned_tok_s, "tok/s", "the same x 0.85"),
        Quantity(
            "if offloaded weights were streamed instead",
            h.streamed_tok_s,
            "tok/s",
            "link GB/s x 0.85 / CPU-resident bytes per token",
        ),
    ]
    if h.combined_tok_s is not None:
        rows.append(
            Quantity(
                "hybrid decode estimate",
                h.combined_tok_s,
                "tok/s",
                "1 / (CPU bytes / (72% of DDR peak) + GPU bytes / GPU bandwidth), capped by the PCIe rule",
            )
        )
    return _quantities(rows)
