"""Regenerate answers with the target itself, so the drafter learns the target's own distribution.

Resumable: rows are appended (and fsynced) one by one, and a restart skips ids already written, so
an interruption loses at most the prompt in flight and never duplicates a row. Engines:
- "local" (default): in-process. batch 1 uses draftsmith's speculative engine (ngram drafter,
  lossless sampling); batch > 1 uses continuous batching (`engine/batch_sampler.py`), which has
  far more throughput once many prompts are in flight.
- "openai": any OpenAI-compatible server (vLLM, SGLang, llama.cpp server) for users with GPUs.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from draftsmith.engine.sampling import SamplingParams
from draftsmith.errors import DraftsmithError
from draftsmith.training.jsonl import Appender, done_ids, read_rows


@dataclass
class RegenConfig:
    max_new_tokens: int = 256
    temperature: float = 0.7  # the DeepSpec recipe: T 0.7, top_p 0.8, top_k 20
    top_p: float = 0.8
    top_k: int = 20
    seed: int = 0
    batch: int = 32
    max_prompt_tokens: int | None = None  # skip longer prompts (their prefill and cache cost most)

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "batch"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise DraftsmithError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.max_prompt_tokens is not None and self.max_prompt_tokens < 1:
            raise DraftsmithError(f"max_prompt_tokens must be positive, got {self.max_prompt_tokens}")


def _prompts(path: str | Path) -> list[dict]:
    rows = []
    for i, row in enumerate(read_rows(path)):
        text = row.get("prompt") or row.get("text") or row.get("instruction") or row.get("question")
        if not isinstance(text, str) or not text.strip():
            raise DraftsmithError(f"{path}: row {i + 1} has no prompt")
        rows.append({"id": str(row.get("id", i)), "prompt": text, "category": row.get("category", "")})
    if not rows:
        raise DraftsmithError(f"{path} has no prompts")
    return rows


Engine = Callable[[list[dict]], Iterable[tuple[dict, dict]]]
"""Takes prompt rows; yields (row, answer fields) pairs as answers finish, in any order."""


def _answer(target, tokens: list[int], finish_reason: str, eos_id: int | None = None) -> dict:
    """The answer as text and as the target's own token ids: decoding to text and encoding again
    can give other ids than the target wrote, so the cache trains on `answer_ids` when present;
    `eos_id` is the end-of-sequence token the target chose (models often have several)."""
    row = {
        "answer": target.decode(tokens),
        "answer_ids": list(tokens),
        "finish_reason": finish_reason,
        "new_tokens": len(tokens),
    }
    if eos_id is not None:
        row["eos_id"] = int(eos_id)
    return row


def local_engine(target, cfg: RegenConfig) -> Engine:
    """Answers from the in-process target.

    batch 1: the speculative engine (ngram drafter, lossless sampling), seeded per prompt id.
    batch > 1: continuous batching over the lean runner (`BatchSampler`, ~6x the batch-1 throughput
    on a 2-core CPU at batch 32); models without the lean path use batched transformers sampling.
    """
    from draftsmith.drafters.registry import build_drafter
    from draftsmith.engine.batch_sampler import BatchSampler
    from draftsmith.engine.decode import speculative_generate
    from draftsmith.engine.lean_llama import LeanLlamaRunner

    tok = target.tokenizer

    def seeded(row_id: str) -> SamplingParams:
        """Sampling settings seeded by (--seed, prompt id): reruns reproduce, prompts differ."""
        return SamplingParams(
            cfg.temperature, cfg.top_p, cfg.top_k, seed=cfg.seed + zlib.crc32(row_id.encode())
        )

    def encode(rows: list[dict]) -> tuple[list[dict], list[list[int]]]:
        encoded = [target.encode(r["prompt"]) for r in rows]
        if cfg.max_prompt_tokens:
            kept = [(r, e) for r, e in zip(rows, encoded, strict=True) if len(e) <= cfg.max_prompt_tokens]
            rows, encoded = [r for r, _ in kept], [e for _, e in kept]
        limit = target.runner.max_context
        too_long = [
            r["id"] for r, e in zip(rows, encoded, strict=True) if len(e) + cfg.max_new_tokens > limit
        ]
        if too_long:
            raise DraftsmithError(
                f"{len(too_long)} prompt(s) plus --max-new-tokens {cfg.max_new_tokens} exceed the target's "
                f"context of {limit} tokens (ids: {', '.join(too_long[:5])}); drop them or lower the budget"
            )
        return rows, encoded

    def speculative(rows: list[dict]) -> Iterable[tuple[dict, dict]]:
        drafter = build_drafter("ngram", target)
        for row, ids in zip(*encode(rows), strict=True):
            stop = target.stop_rule(cfg.max_new_tokens)
            res = speculative_generate(target.runner, drafter, ids, stop, seeded(row["id"]))
            yield row, _answer(target, res.tokens, res.finish_reason)

    @torch.inference_mode()
    def continuous(rows: list[dict]) -> Iterable[tuple[dict, dict]]:
        rows, encoded = encode(rows)
        if not rows:
            return
        params = seeded(rows[0]["id"])  # from the file's first row, before reordering
        # shortest first within windows of 8 x batch prompts: slots that run side by side then have
        # similar lengths (every step's attention spans the longest active slot), while the file's
        # mix still arrives in order, so an interrupted run keeps a representative sample
        window = 8 * cfg.batch
        order = [
            i
            for lo in range(0, len(rows), window)
            for i in sorted(range(lo, min(len(rows), lo + window)), key=lambda i: len(encoded[i]))
        ]
        rows, encoded = [rows[i] for i in order], [encoded[i] for i in order]
        sampler = BatchSampler(
            target.runner, min(cfg.batch, len(rows)), max(map(len, encoded)) + cfg.max_new_tokens
        )
        for done in sampler.generate(encoded, cfg.max_new_tokens, params, target.eos_ids):
            yield rows[done.index], _answer(target, done.tokens, done.finish_reason, done.eos_id)

    @torch.inference_mode()
    def hf_batches(rows: list[dict]) -> Iterable[tuple[dict, dict]]:
        pad = getattr(tok, "pad_token_id", None)
        pad = pad if pad is not None else min(target.eos_ids)
        for start in range(0, len(rows), cfg.batch):
            group, encoded = encode(rows[start : start + cfg.batch])
            if not group:
                continue
            width = max(map(len, encoded))
            ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded], device=target.device)
            attn = torch.tensor(
                [[0] * (width - len(e)) + [1] * len(e) for e in encoded], device=target.device
            )
            params = seeded(group[0]["id"])
            torch.manual_seed(params.seed)
            out = target.model.generate(
                ids,
                attention_mask=attn,
                do_sample=params.temperature > 0,
                temperature=params.temperature or None,
                top_p=params.top_p,
                top_k=params.top_k or None,
                max_new_tokens=cfg.max_new_tokens,
                eos_token_id=sorted(target.eos_ids),
                pad_token_id=pad,
            )
            for row, toks in zip(group, out[:, width:].tolist(), strict=True):
                cut = next((i for i, t in enumerate(toks) if t in target.eos_ids), None)
                yield (
                    row,
                    _answer(target, toks if cut is None else toks[:cut], "length" if cut is None else "eos"),
                )

    if cfg.batch == 1:
        return speculative
    return continuous if isinstance(target.runner, LeanLlamaRunner) else hf_batches


def openai_engine(
    base_url: str,
    model: str,
    cfg: RegenConfig,
    api_key: str = "EMPTY",
    concurrency: int = 8,
    retries: int = 3,
) -> Engine:
    """Answers from an OpenAI-compatible chat endpoint (vLLM / SGLang accept top_k as an extra)."""
    url = base_url.rstrip("/") + (
        "/chat/completions" if base_url.rstrip("/").endswith("/v1") else "/v1/chat/completions"
    )

    def one(row: dict) -> dict:
        body = json.dumps(
            {
                "model": model,
                "messages": [{"role": "user", "content": row["prompt"]}],
                "temperature": cfg.temperature,
                "top_p": cfg.top_p,
                "top_k": cfg.top_k,
                "max_tokens": cfg.max_new_tokens,
                "seed": cfg.seed,
            }
        ).encode()
        req = urllib.request.Request(
            url, body, {"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"}
        )
        for attempt in range(retries):
            try:
                with urllib.request.urlopen(req, timeout=600) as r:
                    data = json.loads(r.read())
                choice = data["choices"][0]
                usage = data.get("usage") or {}
                return {
                    "answer": choice["message"]["content"] or "",
                    "finish_reason": choice.get("finish_reason", ""),
                    "new_tokens": usage.get("completion_tokens", 0),
                }
            except (urllib.error.URLError, TimeoutError, KeyError, ValueError) as e:
                if attempt == retries - 1:
                    raise DraftsmithError(f"server {url} failed for prompt {row['id']}: {e}") from e
                time.sleep(2**attempt)
        raise AssertionError("unreachable")

    def streamed(rows: list[dict]) -> Iterable[tuple[dict, dict]]:
        with ThreadPoolExecutor(concurrency) as pool:
            futures = {pool.submit(one, r): r for r in rows}
            try:
                for fut in as_completed(futures):
                    yield futures[fut], fut.result()
            finally:
                for fut in futures:
                    fut.cancel()

    return streamed


def regenerate(
    prompts_path: str | Path,
    out_path: str | Path,
    engine: Engine,
    chunk: int | None = None,
    limit: int | None = None,
    progress: bool = True,
) -> dict:
    """Write one answer row per prompt to out_path, skipping ids already there. Returns counts.

    Rows are written the moment the engine yields them; `chunk` (default: all) bounds how many
    prompts one engine call receives.
    """
    rows = _prompts(prompts_path)[:limit]
    out = Path(out_path)
    finished = done_ids(out)
    todo = [r for r in rows if r["id"] not in finished]
    t0, tokens, written = time.perf_counter(), 0, 0
    chunk = chunk or max(1, len(todo))
    with (
        Appender(out) as sink,
        tqdm(total=len(todo), desc="regenerate", unit="prompt", disable=not progress) as bar,
    ):
        for start in range(0, len(todo), chunk):
            for row, ans in engine(todo[start : start + chunk]):
                sink.write({**row, **ans})
                tokens += ans.get("new_tokens", 0)
                written += 1
                bar.update(1)
                bar.set_postfix(tok_s=f"{tokens / (time.perf_counter() - t0):.1f}")
    return {
        "prompts": len(rows),
        "skipped": len(rows) - len(todo),
        "written": written,
        "not_answered": len(todo) - written,  # e.g. over --max-prompt-tokens
        "new_tokens": tokens,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def iter_pairs(path: str | Path) -> Iterable[dict]:
    """Rows with a prompt and a non-empty answer (for the cache builder)."""
    for row in read_rows(path):
        if row.get("prompt") and row.get("answer"):
            yield row
