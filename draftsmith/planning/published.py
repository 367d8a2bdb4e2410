"""The planner against published measurements: each case is a number someone measured and published,
with its source; the planner predicts it from the same presets, model shapes and backends a user's
plan uses. A few cases fit the backends' parameters (marked `fit`, not counted); the rest are held
out and must land within 25% (at least 80% of them) and never off by more than 2x.

`draftsmith plan --published` prints the table; tests/test_plan_published.py checks the bounds and
refits the parameters from the fit cases to confirm the constants in planning.backends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from draftsmith.planning import backends, hardware, model_spec
from draftsmith.planning.methods import drafter_cost
from draftsmith.planning.offload import bound
from draftsmith.planning.steps import RooflineSteps

WITHIN = 0.25  # a held-out prediction within 25% of the published number counts as a hit
NEEDED = 0.80  # share of held-out cases that must be hits
NEVER = 2.0  # and none may be off by more than this factor

PR15802 = "llama.cpp PR 15802, github.com/ggml-org/llama.cpp/pull/15802 (llama-bench pp512 at micro-batch 1)"
EAGLE3 = "EAGLE-3 paper, arXiv 2503.01840"
NORMIE = "normiebench, github.com/brand-o/normiebench/issues/"
PR2917 = "llama.cpp PR 2917, github.com/ggml-org/llama.cpp/pull/2917 (M2 Ultra, llama-bench tg 128, master)"


@dataclass(frozen=True)
class Case:
    """One published measurement and what the planner needs to predict it."""

    key: str
    kind: str  # "decode" (tok/s), "speedup" (x, batch 1), "concurrency" (x, throughput at a batch), "offload"
    what: str
    source: str
    published: float
    gpu: str | None  # a hardware preset (GPU or Apple); None: a CPU-only case
    model: str  # a built-in example
    bits: float  # bits per weight of the published run (GGUF formats: their nominal bits)
    engine: str
    context: float  # mean tokens in the KV cache while decoding (stated where the source does not say)
    cpu: str | None = None
    batch: int = 1
    method: str | None = None
    drafts: int = 0
    tau: float | None = None  # published accepted length (tokens per target step)
    tau_from: str | None = None  # no published tau: the case whose published speedup fixes it
    fit: str = ""  # the parameter this case fits ("" = held out)
    assumption: str = ""

    @property
    def unit(self) -> str:
        return "tok/s" if self.kind in ("decode", "offload") else "x"


_MTB = "MT-Bench prompts: context assumed ~128 prompt + 512 answer tokens (mean 384)"
VLLM20780 = "vLLM issue 20780, github.com/vllm-project/vllm/issues/20780 (K sweep, batch 1)"
OURS = "docs/BENCHMARKS.md, the llama.cpp table (2026-12-07)"
_H100 = "GPU not named in the issue; H100 assumed (the same author's numbers in vLLM PR 16937 are 'H100 BS1')"
_EAGLE1 = "; EAGLE-1's drafter priced as EAGLE-3's (one decoder layer and the head)"

CASES: tuple[Case, ...] = (
    # --- single-stream decode, llama.cpp on consumer GPUs ---------------------------------------
    Case(
        "3090-llama3-8b-q4_0",
        "decode",
        "RTX 3090, Llama-3-8B Q4_0, llama.cpp",
        PR15802,
        155.02,
        "3090",
        "llama-3.1-8b",
        4.5,
        "llamacpp",
        256,
        fit="llamacpp-gpu efficiency",
    ),
    Case(
        "3090-llama3-8b-bf16",
        "decode",
        "RTX 3090, Llama-3-8B BF16, llama.cpp",
        "llama.cpp PR 14262, github.com/ggml-org/llama.cpp/pull/14262 (pp512 at micro-batch 1)",
        58.06,
        "3090",
        "llama-3.1-8b",
        16,
        "llamacpp",
        256,
    ),
    Case(
        "5090-qwen3-8b-q4_k_m",
        "decode",
        "RTX 5090, Qwen3-8B Q4_K_M, llama.cpp (Docker Model Runner, WSL2)",
        "github.com/CambrianTech/continuum/pull/1627 (221.7 tok/s generation)",
        221.7,
        "5090",
        "qwen3-8b",
        4.85,
        "llamacpp",
        512,
        assumption="context not stated: 512 assumed; Q4_K_M at its nominal 4.85 bits",
    ),
    Case(
        "4090-qwen3-30b-a3b-q4_0",
        "decode",
        "RTX 4090, Qwen3-30B-A3B (MoE) Q4_0, llama.cpp",
        "llama.cpp PR 16834, github.com/ggml-org/llama.cpp/pull/16834 (tg128, master)",
        161.55,
        "4090",
        "qwen3-30b-a3b",
        4.5,
        "llamacpp",
        64,
        fit="llamacpp-gpu expert efficiency",
    ),
    # --- Apple M-series, llama.cpp Metal ----------------------------------------------------------
    Case(
        "m1max-llama31-8b-q4_k_m",
        "decode",
        "M1 Max, Llama-3.1-8B Q4_K_M, llama.cpp Metal",
        NORMIE + "40 (tg128)",
        46.2,
        "m1-max",
        "llama-3.1-8b",
        4.85,
        "llamacpp",
        64,
        fit="llamacpp-apple efficiency",
    ),
    Case(
        "m4-llama31-8b-q4_k_m",
        "decode",
        "M4 (Mac mini), Llama-3.1-8B Q4_K_M, llama.cpp Metal",
        NORMIE + "3 (tg128)",
        20.87,
        "m4",
        "llama-3.1-8b",
        4.85,
        "llamacpp",
        64,
    ),
    Case(
        "m2ultra-llama-7b-q4_0",
        "decode",
        "M2 Ultra, LLaMA-7B Q4_0, llama.cpp Metal (2023 build)",
        PR2917,
        88.54,
        "m2-ultra",
        "llama-2-7b",
        4.5,
        "llamacpp",
        64,
    ),
    Case(
        "m2ultra-llama-7b-q8_0",
        "decode",
        "M2 Ultra, LLaMA-7B Q8_0, llama.cpp Metal (2023 build)",
        PR2917,
        62.05,
        "m2-ultra",
        "llama-2-7b",
        8.5,
        "llamacpp",
        64,
    ),
    # --- CPUs, llama.cpp ----------------------------------------------------------------------------
    Case(
        "3970x-llama31-8b-q4_k_m",
        "decode",
        "Threadripper 3970X (4 x DDR4-3200), Llama-3.1-8B Q4_K_M, llama.cpp CPU",
        NORMIE + "52 (tg128; the submitter notes an overclock)",
        16.78,
        None,
        "llama-3.1-8b",
        4.85,
        "llamacpp",
        64,
        cpu="threadripper-3970x",
    ),
    Case(
        "dev-vm-smollm2-q4_1",
        "decode",
        "this project's 2-core AMD EPYC VM, SmolLM2-135M Q4_1, llama.cpp (2 threads)",
        "docs/BENCHMARKS.md (llama-bench -p 1: 7.54 ms a 1-token step)",
        1000 / 7.54,
        None,
        "smollm2-135m",
        5.7,
        "llamacpp",
        1,
        cpu="dev",
        assumption="the VM's measured ~25 GB/s copy bandwidth stands in for a DDR spec",
    ),
    # --- data-centre GPUs, vLLM and SGLang, batch 1 -------------------------------------------------
    Case(
        "a100-40g-llama31-8b-vllm",
        "decode",
        "A100 40GB, Llama-3.1-8B BF16, vLLM 0.23, one request",
        "johnmusgrave.com/p/vllm-throughput-latency-sweep-on (about 75 tok/s at concurrency 1)",
        75.0,
        "a100-40g",
        "llama-3.1-8b",
        16,
        "vllm",
        1088,
        fit="vllm efficiency",
    ),
    Case(
        "h100-llama31-8b-vllm",
        "decode",
        "H100 80GB HBM3, Llama-3.1-8B FP16, vLLM 0.21, one request",
        "yobitelcomm.github.io/bench/recipes/concurrency-sweep/ (TPOT p50 6.48 ms at concurrency 1)",
        1000 / 6.48,
        "h100-sxm",
        "llama-3.1-8b",
        16,
        "vllm",
        256,
        assumption="chatbot-short prompts: context 256 assumed",
    ),
    Case(
        "h100-llama31-8b-sglang",
        "decode",
        "H100, Llama-3.1-8B BF16, SGLang, batch 1, MT-Bench",
        EAGLE3 + " Table 4 (158.34 tok/s)",
        158.34,
        "h100-sxm",
        "llama-3.1-8b",
        16,
        "sglang",
        384,
        fit="sglang efficiency",
        assumption=_MTB,
    ),
    # --- speculative speedups at batch 1 ----------------------------------------------------------
    Case(
        "b200-qwen3-8b-dflash-gsm8k",
        "speedup",
        "B200, Qwen3-8B BF16, DFlash block 16 (15 drafts), GSM8K, T=0",
        "z-lab DFlash, Qwen3-8B-DFlash-b16 model card (B200, T=0; GSM8K: tau 6.55, 5.20x)",
        5.20,
        "b200",
        "qwen3-8b",
        16,
        "sglang",
        640,
        method="dflash",
        drafts=15,
        tau=6.55,
        assumption="engine not stated (SGLang assumed); context ~128 prompt + 1024 answer",
    ),
    Case(
        "b200-qwen3-8b-dflash-mtbench",
        "speedup",
        "B200, Qwen3-8B BF16, DFlash block 16 (15 drafts), MT-Bench, T=0",
        "z-lab DFlash, Qwen3-8B-DFlash-b16 model card (B200, T=0; MT-Bench: tau 4.25, 2.79x)",
        2.79,
        "b200",
        "qwen3-8b",
        16,
        "sglang",
        384,
        method="dflash",
        drafts=15,
        tau=4.25,
        assumption="engine not stated (SGLang assumed); " + _MTB,
    ),
    # --- offload: experts on the CPU ------------------------------------------------------------------
    Case(
        "2080-qwen3-30b-a3b-n-cpu-moe",
        "offload",
        "RTX 2080 8GB + i9-10900X (4 x DDR4), Qwen3-30B-A3B Q4_K_M, llama.cpp --n-cpu-moe 36",
        "github.com/AlexsJones/llmfit/pull/755 (36.7 tok/s, the server's own generation speed)",
        36.7,
        "2080",
        "qwen3-30b-a3b",
        4.85,
        "llamacpp",
        512,
        cpu="ddr4-3200x4",
        assumption="4 x DDR4-3200 (the source measured ~102 GB/s); the planner picks the offloaded "
        "experts from VRAM itself (36 of 48 layers in the run)",
    ),
)

# one concurrency curve per engine: EAGLE-3 throughput against batch, chains without trees
_SGL = [
    (2, 1.81),
    (4, 1.82),
    (8, 1.62),
    (16, 1.48),
    (24, 1.39),
    (32, 1.32),
    (48, 1.38),
    (56, 1.34),
    (64, 1.38),
]
_VLLM = [(2, 1.75), (4, 1.68), (8, 1.58), (16, 1.49), (24, 1.42), (32, 1.36), (48, 1.21), (56, 1.01)]
CASES += tuple(
    Case(
        f"h100-sglang-eagle3-b{b}",
        "concurrency",
        f"H100, Llama-3.1-8B, SGLang 0.4.4, EAGLE-3 chain of 3, batch {b}, MT-Bench",
        EAGLE3 + " Table 3",
        x,
        "h100-sxm",
        "llama-3.1-8b",
        16,
        "sglang",
        384,
        batch=b,
        method="eagle3",
        drafts=3,
        tau_from=None if b == 2 else "h100-sglang-eagle3-b2",
        fit="tau of this curve" if b == 2 else ("serving compute efficiency" if b == 64 else ""),
        assumption=_MTB,
    )
    for b, x in _SGL
)
CASES += tuple(
    Case(
        f"3090-vllm-eagle3-b{b}",
        "concurrency",
        f"RTX 3090, Llama-3.1-8B, vLLM, EAGLE-3 chain of 2, batch {b}, MT-Bench",
        EAGLE3 + " Table 5",
        x,
        "3090",
        "llama-3.1-8b",
        16,
        "vllm",
        384,
        batch=b,
        method="eagle3",
        drafts=2,
        tau_from=None if b == 2 else "3090-vllm-eagle3-b2",
        fit="tau of this curve" if b == 2 else "",
        assumption=_MTB,
    )
    for b, x in _VLLM
)


def _vllm_chain(label: str, k: int, tau: float, speedup: float, fit: str = "") -> Case:
    """One point of vLLM issue 20780's sweep: EAGLE-3 or EAGLE-1 chains of k on Llama-3.1-8B at batch 1
    (vanilla TPOT 7.07 ms; speedup = 7.07 ms over the speculative TPOT)."""
    return Case(
        f"h100-vllm-{label.lower().replace('-', '')}-k{k}",
        "speedup",
        f"H100, Llama-3.1-8B BF16, vLLM V1, {label} chain of {k}, batch 1, MT-Bench",
        VLLM20780 + f" (tau {tau}, {speedup}x)",
        speedup,
        "h100-sxm",
        "llama-3.1-8b",
        16,
        "vllm",
        384,
        method="eagle3",
        drafts=k,
        tau=tau,
        fit=fit,
        assumption=_H100 + ("" if label == "EAGLE-3" else _EAGLE1) + "; " + _MTB,
    )


def _ours_in_llamacpp(method: str, what: str, tau: float, speedup: float) -> Case:
    """Our drafters in llama-server on this project's VM (docs/BENCHMARKS.md): slowdowns."""
    return Case(
        f"dev-llamacpp-{method}",
        "speedup",
        f"this project's 2-core AMD EPYC VM, SmolLM2-135M Q4_1, llama-server, our {what}, 3 drafts",
        OURS + f" (tau {tau}, {speedup}x over llama.cpp plain, 40 prompts)",
        speedup,
        None,
        "smollm2-135m",
        4.5,
        "llamacpp",
        300,
        cpu="dev",
        method=method,
        drafts=3,
        tau=tau,
        assumption="the VM's measured ~25 GB/s copy bandwidth stands in for a DDR spec",
    )


_FITS = {2: "vllm round overhead", 7: "vllm draft pass floor"}
CASES += (
    tuple(
        _vllm_chain("EAGLE-3", k, tau, x, _FITS.get(k, ""))
        for k, tau, x in (
            (2, 2.36, 1.64),
            (3, 2.79, 1.73),
            (4, 3.08, 1.75),
            (5, 3.32, 1.71),
            (6, 3.46, 1.68),
            (7, 3.54, 1.65),
        )
    )
    + tuple(
        _vllm_chain("EAGLE-1", k, tau, x)
        for k, tau, x in (
            (2, 2.10, 1.62),
            (3, 2.29, 1.65),
            (4, 2.39, 1.58),
            (5, 2.43, 1.50),
            (6, 2.45, 1.43),
            (7, 2.47, 1.36),
        )
    )
    + (
        _ours_in_llamacpp("dspark", "DSpark (8k cut)", 1.55, 0.51),
        _ours_in_llamacpp("eagle3", "EAGLE-3", 1.59, 0.50),
        _ours_in_llamacpp("dflash", "DFlash (z-lab)", 1.38, 0.40),
    )
)

BY_KEY = {c.key: c for c in CASES}


def _hardware(case: Case) -> hardware.Hardware:
    if case.gpu:
        return hardware.gpu(case.gpu)
    return hardware.cpu_memory(case.cpu).as_hardware()


def _steps(case: Case, table: dict[str, backends.Backend] | None = None) -> RooflineSteps:
    hw = _hardware(case)
    spec = model_spec.resolve(case.model, case.bits)
    b = backends.backend(case.engine, hw.kind, case.bits)
    if table and b.key in table:
        b = replace(table[b.key], curve=b.curve)
    return RooflineSteps(hw, spec, case.context, case.batch, 16, b)


def _speedup(case: Case, steps: RooflineSteps, tau: float) -> float:
    """tau x T(B, 1) / (drafting k tokens + T(B, k + 1)): a fixed draft length, as the source ran it."""
    d = drafter_cost(case.method, steps.spec)
    k = case.drafts
    return tau * steps.target(1) / (steps.draft(d, k) + steps.target(k + 1))


def _solve(f, target: float, lo: float, hi: float) -> float:
    """x in [lo, hi] with f(x) = target for an increasing f (bisection)."""
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def tau_of(case: Case, table: dict[str, backends.Backend] | None = None) -> float:
    """The accepted length a case uses: published, or fixed by its curve's fit case."""
    if case.tau is not None:
        return case.tau
    anchor = BY_KEY[case.tau_from] if case.tau_from else case
    steps = _steps(anchor, table)
    return _solve(lambda t: _speedup(anchor, steps, t), anchor.published, 1.0, anchor.drafts + 1.0)


def predict(case: Case, table: dict[str, backends.Backend] | None = None) -> float:
    """The planner's prediction for a case (tok/s or a speedup)."""
    steps = _steps(case, table)
    if case.kind == "decode":
        return 1 / steps.target(1)
    if case.kind == "offload":
        cpu = hardware.cpu_memory(case.cpu)
        kv = steps.spec.kv_bytes_per_token(16) * case.context
        b = steps.backend
        return bound(
            steps.spec,
            steps.hw,
            cpu,
            hardware.pcie("gen3x16"),
            kv,
            gpu_efficiency=b.efficiency,
            expert_efficiency=b.expert_efficiency,
        ).combined_tok_s
    return _speedup(case, steps, tau_of(case, table))


@dataclass(frozen=True)
class Result:
    case: Case
    predicted: float

    @property
    def ratio(self) -> float:
        """predicted / published."""
        return self.predicted / self.case.published

    @property
    def within(self) -> bool:
        return abs(self.ratio - 1) <= WITHIN

    @property
    def counted(self) -> bool:
        return not self.case.fit

    def to_json(self) -> dict:
        c = self.case
        return {
            "key": c.key,
            "kind": c.kind,
            "what": c.what,
            "source": c.source,
            "published": c.published,
            "unit": c.unit,
            "predicted": round(self.predicted, 3),
            "ratio": round(self.ratio, 4),
            "fit": c.fit or None,
            "within_25pct": self.within,
            "assumption": c.assumption or None,
        }


def implied_efficiency(result: Result) -> float | None:
    """For a decode case: the share of peak bandwidth the published number implies (the backend's
    efficiency over the prediction's ratio; decode time is nearly proportional to it)."""
    if result.case.kind != "decode":
        return None
    return _steps(result.case).backend.efficiency / result.ratio


def evaluate(table: dict[str, backends.Backend] | None = None) -> list[Result]:
    return [Result(c, predict(c, table)) for c in CASES]


def summary(results: list[Result]) -> dict:
    """Held-out count, hits within 25%, the worst ratio, and the fit cases."""
    held = [r for r in results if r.counted]
    worst = max(held, key=lambda r: abs(math.log(r.ratio)))
    hits = sum(r.within for r in held)
    return {
        "held_out": len(held),
        "within_25pct": hits,
        "share_within": hits / len(held),
        "worst": {"key": worst.case.key, "ratio": round(worst.ratio, 3)},
        "beyond_2x": [r.case.key for r in held if not 1 / NEVER <= r.ratio <= NEVER],
        "fit_cases": {r.case.key: r.case.fit for r in results if r.case.fit},
        "passes": hits / len(held) >= NEEDED and all(1 / NEVER <= r.ratio <= NEVER for r in held),
    }


def markdown(results: list[Result]) -> str:
    """The table of docs/PLANNING.md: every case, predicted against published."""
    out = [
        "| case | kind | published | predicted | ratio | within 25% | source |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r.case
        mark = f"fit ({c.fit})" if c.fit else ("yes" if r.within else "NO")
        note = f" ({c.assumption})" if c.assumption else ""
        out.append(
            f"| {c.what} | {c.kind} | {c.published:.4g} {c.unit} | {r.predicted:.4g} {c.unit} "
            f"| {r.ratio:.2f} | {mark} | {c.source}{note} |"
        )
    s = summary(results)
    out += [
        "",
        f"Held out: {s['held_out']} cases, {s['within_25pct']} within 25% ({s['share_within']:.0%}; needed "
        f"{NEEDED:.0%}); worst {s['worst']['key']} at {s['worst']['ratio']:.2f}x; beyond 2x: "
        f"{', '.join(s['beyond_2x']) or 'none'}. {len(s['fit_cases'])} fit cases (marked) are not counted.",
    ]
    return "\n".join(out)


def _solve_down(case_key: str, table: dict, backend_key: str, field: str) -> float:
    """A per-round cost (seconds) in table[backend_key] that makes a speculative case's prediction
    its published speedup (the speedup falls as the cost rises)."""
    case = BY_KEY[case_key]

    def f(x: float) -> float:  # increasing in x: the negated speedup
        table[backend_key] = replace(table[backend_key], **{field: x})
        return -predict(case, table)

    x = _solve(f, -case.published, 0.0, 0.05)
    table[backend_key] = replace(table[backend_key], **{field: x})
    return x


def fit() -> dict[str, float]:
    """Refit the backends' parameters from the fit cases (what the constants in planning.backends hold).

    Order: llama.cpp's GPU efficiency, then its expert efficiency (MoE), Metal's efficiency; then the
    serving engines' efficiencies and their compute efficiency together (a few rounds: each depends
    weakly on the others)."""
    table = dict(backends.BACKENDS)

    def with_(key: str, **kw) -> None:
        table[key] = replace(table[key], **kw)

    def solve_eff(case_key: str, backend_key: str, field: str = "efficiency") -> float:
        case = BY_KEY[case_key]

        def f(x: float) -> float:
            with_(backend_key, **{field: x})
            return predict(case, table)

        x = _solve(f, case.published, 0.01, 2.0)
        with_(backend_key, **{field: x})
        return x

    out = {
        "llamacpp-gpu efficiency": solve_eff("3090-llama3-8b-q4_0", "llamacpp-gpu"),
        "llamacpp-gpu expert efficiency": solve_eff(
            "4090-qwen3-30b-a3b-q4_0", "llamacpp-gpu", "expert_efficiency"
        ),
        "llamacpp-apple efficiency": solve_eff("m1max-llama31-8b-q4_k_m", "llamacpp-apple"),
    }
    b64 = BY_KEY["h100-sglang-eagle3-b64"]

    def g(ce: float) -> float:
        for k in ("vllm-gpu", "sglang-gpu"):
            with_(k, compute_efficiency=ce)
        return predict(b64, table)

    for _ in range(4):
        out["vllm efficiency"] = solve_eff("a100-40g-llama31-8b-vllm", "vllm-gpu")
        for _ in range(6):  # the floor sets the slope over the chain length, the round cost its level
            out["vllm round overhead"] = _solve_down("h100-vllm-eagle3-k2", table, "vllm-gpu", "round_s")
            out["vllm draft pass floor"] = _solve_down(
                "h100-vllm-eagle3-k7", table, "vllm-gpu", "pass_floor_s"
            )
        out["sglang efficiency"] = solve_eff("h100-llama31-8b-sglang", "sglang-gpu")
        ce = _solve(g, b64.published, 0.05, 5.0)
        g(ce)
        out["serving compute efficiency"] = ce
    return out
