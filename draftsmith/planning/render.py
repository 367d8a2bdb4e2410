"""A plan as markdown: one table per section, each number beside its formula in words."""

from __future__ import annotations

import math

from draftsmith.planning.hardware import GIB
from draftsmith.planning.plan import METHOD_FORMULAS, Plan, Quantity
from draftsmith.planning.vram import DONT, SWITCH_ON


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
        lines += ["", "## Concurrency", "", *_concurrency(plan)]
    lines += ["", "## Methods", ""]
    if plan.vram and plan.vram[0].verdict == DONT:
        lines += [
            "The model does not fit on the device (see the VRAM budget), so no method is planned on it: "
            "see the CPU/GPU offload bound.",
        ]
    else:
        lines += _methods(plan)
    if plan.vram:
        lines += ["", "## VRAM budget", "", *_vram(plan)]
    if plan.offload:
        lines += ["", "## CPU/GPU offload bound", "", *_offload(plan)]
    lines += ["", "## Recommendation", "", plan.recommendation]
    if plan.backend:
        lines += ["", f"Step costs: {plan.steps}."]
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


def _concurrency(plan: Plan) -> list[str]:
    methods = list(plan.concurrency[0].get("speedup", {}))
    head = "| concurrency B | ridge point (tokens/step) | free draft length | plain tok/s, all users |"
    head += "".join(f" {m} speedup |" for m in methods)
    out = [head, "|---|---|---|---|" + "---|" * len(methods)]
    for c in plan.concurrency:
        fits = "" if c.get("plain_fits", True) else " (KV does not fit)"
        cells = "".join(f" {c['speedup'][m]:.2f}x |" for m in methods)
        out.append(
            f"| {c['concurrency']}{fits} | {_fmt(c['ridge_tokens'])} | {c['free_k']} "
            f"| {_fmt(c.get('plain_tok_s'))} |{cells}"
        )
    out += [
        "",
        "Speedup at B: E x T(B, 1) / (drafting + T(B, k+1)) at the best k there, mean over tasks; a verify "
        "step of B x (k+1) rows is priced by the backend's verify-cost curve and the roofline at its "
        "achievable FLOP/s, so extra drafts stop being free as the batch grows. Only methods that fit.",
    ]
    return out


def _methods(plan: Plan) -> list[str]:
    sources: dict[str, int] = {}
    out = [
        "| method | task | k | E tokens/round | draft ms | verify ms | plain ms | speedup | tok/s per user "
        "| VRAM | acceptance |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in plan.methods:
        n = sources.setdefault(r.acceptance.source, len(sources) + 1)
        label = "measured" if r.acceptance.measured else "typical, not measured"
        fits = "-" if r.fits is None else ("fits" if r.fits == SWITCH_ON else f"does not fit ({r.fits})")
        out.append(
            f"| {r.method} | {r.task} | {r.k} | {r.expected:.2f} | {r.draft_ms:.3g} | {r.verify_ms:.3g} "
            f"| {r.plain_ms:.3g} | {r.speedup:.2f}x | {r.tok_s:.3g} | {fits} | {label} [{n}] |"
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
        f"GiB. Total = weights (params x bits / 8) + target KV at (context + answer) x concurrency "
        f"({plan.workload.get('kv_bits', 16):g}-bit KV) + drafter weights + drafter KV + verification KV "
        "(k extra positions per sequence); usable = 90% of VRAM (10% workspace: CUDA context, activations, "
        "allocator). Fits context: the longest context at which target and drafter fit.",
    ]
    return out


def _offload(plan: Plan) -> list[str]:
    h = plan.offload
    rows = [
        Quantity("weights offloaded to CPU", h.offloaded_bytes / GIB, "GiB", "weights - (90% of VRAM - KV)"),
        Quantity(
            "CPU-resident bytes per token",
            h.cpu_bytes_per_token / 1e9,
            "GB",
            "offloaded experts x routed share (experts per token / experts) + offloaded dense weights",
        ),
        Quantity(
            "GPU bytes per token",
            (h.gpu_bytes_per_token + h.kv_bytes_per_token) / 1e9,
            "GB",
            "GPU-resident weights read + the KV cache the GPU attends to",
        ),
        Quantity(
            "GPU part alone",
            h.gpu_tok_s,
            "tok/s",
            f"{h.gpu_efficiency:.0%} of GPU bandwidth / GPU bytes per token (nothing offloaded can beat it)",
        ),
    ]
    if h.cpu_tok_s:
        rows.append(
            Quantity(
                f"memory-channel ceiling ({h.cpu})",
                f"{h.cpu_tok_s[0]:.1f}-{h.cpu_tok_s[1]:.1f}",
                "tok/s",
                "60-85% x channels x GB/s per channel / CPU-resident bytes per token (dense-rate reads)",
            )
        )
    if h.combined_tok_s is not None:
        rows.append(
            Quantity(
                "offload estimate, CPU computes its layers",
                h.combined_tok_s,
                "tok/s",
                f"1 / (CPU bytes / ({h.cpu_efficiency:.0%} of DDR peak) + GPU bytes / GPU achievable "
                "bandwidth "
                f"+ activations over {h.link}); no weights cross the link",
            )
        )
    rows += [
        Quantity(
            "if offloaded weights were streamed over PCIe instead",
            h.streamed_tok_s,
            "tok/s",
            "1 / (CPU-resident bytes / (link GB/s x 0.85) + GPU time, the streamed bytes included)",
        ),
        Quantity(
            f"the article's PCIe rule ({h.link})",
            h.pcie_rule_tok_s,
            "tok/s",
            f"link GB/s per direction / {h.pcie_bytes_per_token / 1e9:g} GB per token "
            "(the article: 0.5 GB, so "
            "PCIe 3.0 x16 ~ 32 tok/s); a rule of thumb for streamed weights, not a cap on CPU-computed ones",
        ),
        Quantity("the same rule, planned", h.pcie_rule_planned_tok_s, "tok/s", "x 0.85"),
    ]
    return _quantities(rows)
