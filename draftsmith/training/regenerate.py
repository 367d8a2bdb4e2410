"""Regenerate answers with the target itself, so the drafter learns the target's own distribution.

Resumable: rows are appended (and fsynced) one by one, and a restart skips ids already written, so
an interruption loses at most the prompt in flight and never duplicates a row. Engines:
- "local" (default): in-process. batch 1 uses draftsmith's speculative engine (ngram drafter,
  lossless sampling); batch > 1 uses batched transformers sampling, which has more throughput on
  a CPU once several prompts are in flight.
- "openai": any OpenAI-compatible server (vLLM, SGLang, llama.cpp server) for users with GPUs.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
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
    batch: int = 1


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


def local_engine(target, cfg: RegenConfig) -> Callable[[list[dict]], list[dict]]:
    """Answers from the in-process target (speculative engine at batch 1, batched HF above)."""
    from draftsmith.drafters.registry import build_drafter
    from draftsmith.engine.decode import speculative_generate

    drafter = build_drafter("ngram", target)
    tok = target.tokenizer

    def one(row: dict, index: int) -> dict:
        params = SamplingParams(cfg.temperature, cfg.top_p, cfg.top_k, seed=cfg.seed + index)
        res = speculative_generate(
            target.runner, drafter, target.encode(row["prompt"]), target.stop_rule(cfg.max_new_tokens), params
        )
        return {
            "answer": target.decode(res.tokens),
            "finish_reason": res.finish_reason,
            "new_tokens": len(res.tokens),
        }

    @torch.inference_mode()
    def batched(rows: list[dict]) -> list[dict]:
        if cfg.batch == 1:
            return [one(r, zlib.crc32(r["id"].encode())) for r in rows]
        encoded = [target.encode(r["prompt"]) for r in rows]
        width = max(map(len, encoded))
        pad = tok.pad_token_id if tok.pad_token_id is not None else min(target.eos_ids)
        ids = torch.tensor([[pad] * (width - len(e)) + e for e in encoded], device=target.device)
        attn = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded], device=target.device)
        torch.manual_seed(cfg.seed + zlib.crc32(rows[0]["id"].encode()))
        out = target.model.generate(
            ids,
            attention_mask=attn,
            do_sample=True,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k or None,
            max_new_tokens=cfg.max_new_tokens,
            eos_token_id=sorted(target.eos_ids),
            pad_token_id=pad,
        )
        results = []
        for row in out[:, width:].tolist():
            cut = next((i for i, t in enumerate(row) if t in target.eos_ids), None)
            toks = row if cut is None else row[:cut]
            results.append(
                {
                    "answer": target.decode(toks),
                    "finish_reason": "length" if cut is None else "eos",
                    "new_tokens": len(toks),
                }
            )
        return results

    return batched


def openai_engine(
    base_url: str,
    model: str,
    cfg: RegenConfig,
    api_key: str = "EMPTY",
    concurrency: int = 8,
    retries: int = 3,
) -> Callable[[list[dict]], list[dict]]:
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

    pool = ThreadPoolExecutor(concurrency)

    def batched(rows: list[dict]) -> list[dict]:
        return list(pool.map(one, rows))

    return batched


def regenerate(
    prompts_path: str | Path,
    out_path: str | Path,
    engine: Callable[[list[dict]], list[dict]],
    chunk: int = 1,
    limit: int | None = None,
    progress: bool = True,
) -> dict:
    """Write one answer row per prompt to out_path, skipping ids already there. Returns counts."""
    rows = _prompts(prompts_path)[:limit]
    out = Path(out_path)
    finished = done_ids(out)
    todo = [r for r in rows if r["id"] not in finished]
    t0, tokens = time.perf_counter(), 0
    with (
        Appender(out) as sink,
        tqdm(total=len(todo), desc="regenerate", unit="prompt", disable=not progress) as bar,
    ):
        for start in range(0, len(todo), chunk):
            group = todo[start : start + chunk]
            for row, ans in zip(group, engine(group), strict=True):
                sink.write({**row, **ans})
                tokens += ans.get("new_tokens", 0)
            bar.update(len(group))
            bar.set_postfix(tok_s=f"{tokens / (time.perf_counter() - t0):.1f}")
    return {
        "prompts": len(rows),
        "skipped": len(rows) - len(todo),
        "written": len(todo),
        "new_tokens": tokens,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def iter_pairs(path: str | Path) -> Iterable[dict]:
    """Rows with a prompt and a non-empty answer (for the cache builder)."""
    for row in read_rows(path):
        if row.get("prompt") and row.get("answer"):
            yield row
