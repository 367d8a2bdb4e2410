"""`draftsmith loadtest`: drive a running server over HTTP at several concurrency levels.

Each level runs `concurrency` simulated users, each sending its next streamed request as soon as
its last one ends, until the level has sent its request count or the run's time limit is spent.
Reported per level: total tok/s (all completion tokens / wall time), per-user tok/s (a request's
completion tokens / its end-to-end latency, queueing included: what one user sees), the streaming
speed once tokens flow, time to first token, latency, errors, and requests cut by the time limit.
A request counts as an error unless its stream ends with usage and [DONE]: nothing is lost silently.
Connections go straight to the server (proxy variables are ignored): a proxy would be measured too.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from itertools import zip_longest
from pathlib import Path

import httpx

from draftsmith.errors import DraftsmithError


@dataclass
class RequestResult:
    ok: bool
    latency_s: float
    ttft_s: float | None = None
    completion_tokens: int = 0
    error: str | None = None


@dataclass
class LevelResult:
    concurrency: int
    sent: int = 0
    ok: int = 0
    errors: int = 0
    cut: int = 0  # still running when the time limit struck (not errors)
    wall_s: float = 0.0
    completion_tokens: int = 0
    total_tok_s: float = 0.0
    per_user_tok_s_p50: float = 0.0
    per_user_tok_s_p10: float = 0.0
    stream_tok_s_p50: float = 0.0
    ttft_s_p50: float = 0.0
    ttft_s_p99: float = 0.0
    latency_s_p50: float = 0.0
    latency_s_p99: float = 0.0
    error_samples: list[str] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(concurrency: int, results: list[RequestResult], cut: int, wall_s: float) -> LevelResult:
    good = [r for r in results if r.ok]
    per_user = [r.completion_tokens / r.latency_s for r in good if r.latency_s > 0]
    streaming = [
        (r.completion_tokens - 1) / (r.latency_s - r.ttft_s)
        for r in good
        if r.ttft_s is not None and r.completion_tokens > 1 and r.latency_s > r.ttft_s
    ]
    ttfts = [r.ttft_s for r in good if r.ttft_s is not None]
    latencies = [r.latency_s for r in good]
    tokens = sum(r.completion_tokens for r in good)
    errors = [r.error or "error" for r in results if not r.ok]
    return LevelResult(
        concurrency=concurrency,
        sent=len(results) + cut,
        ok=len(good),
        errors=len(errors),
        cut=cut,
        wall_s=round(wall_s, 3),
        completion_tokens=tokens,
        total_tok_s=round(tokens / wall_s, 3) if wall_s > 0 else 0.0,
        per_user_tok_s_p50=round(percentile(per_user, 50), 3),
        per_user_tok_s_p10=round(percentile(per_user, 10), 3),
        stream_tok_s_p50=round(percentile(streaming, 50), 3),
        ttft_s_p50=round(percentile(ttfts, 50), 4),
        ttft_s_p99=round(percentile(ttfts, 99), 4),
        latency_s_p50=round(percentile(latencies, 50), 4),
        latency_s_p99=round(percentile(latencies, 99), 4),
        error_samples=sorted(set(errors))[:5],
    )


async def one_request(
    client: httpx.AsyncClient, model: str, prompt: str, chat: bool, max_tokens: int, temperature: float
) -> RequestResult:
    """One streamed request; timed from send to [DONE]."""
    body: dict = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if chat:
        path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": prompt}]
    else:
        path, body["prompt"] = "/v1/completions", prompt
    start = time.perf_counter()
    ttft = None
    tokens = None
    try:
        async with client.stream("POST", path, json=body) as r:
            if r.status_code != 200:
                await r.aread()
                return RequestResult(False, time.perf_counter() - start, error=f"HTTP {r.status_code}")
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    latency = time.perf_counter() - start
                    if tokens is None:
                        return RequestResult(False, latency, ttft, error="stream ended without usage")
                    return RequestResult(True, latency, ttft, tokens)
                chunk = json.loads(data)
                if "error" in chunk:
                    return RequestResult(
                        False, time.perf_counter() - start, error=chunk["error"].get("code") or "error"
                    )
                for choice in chunk.get("choices") or []:
                    text = (
                        choice.get("text") if "text" in choice else (choice.get("delta") or {}).get("content")
                    )
                    if text and ttft is None:
                        ttft = time.perf_counter() - start
                if chunk.get("usage"):
                    tokens = int(chunk["usage"]["completion_tokens"])
        return RequestResult(False, time.perf_counter() - start, ttft, error="stream ended without [DONE]")
    except httpx.HTTPError as e:
        return RequestResult(False, time.perf_counter() - start, ttft, error=type(e).__name__)


async def run_level(
    url: str,
    model: str,
    prompts: list[tuple[str, bool]],
    concurrency: int,
    n_requests: int,
    max_tokens: int,
    temperature: float,
    deadline: float,
    timeout: float,
    headers: dict[str, str] | None = None,
) -> LevelResult:
    """`concurrency` users share `n_requests` requests; nothing starts after `deadline`
    (time.monotonic), and requests still running then are cancelled and counted as cut."""
    results: list[RequestResult] = []
    next_index = iter(range(n_requests))
    limits = httpx.Limits(max_connections=concurrency + 2, max_keepalive_connections=concurrency + 2)

    async with httpx.AsyncClient(
        base_url=url, timeout=timeout, limits=limits, trust_env=False, headers=headers
    ) as client:

        async def user() -> None:
            for i in next_index:
                if time.monotonic() >= deadline:
                    return
                prompt, chat = prompts[i % len(prompts)]
                results.append(await one_request(client, model, prompt, chat, max_tokens, temperature))

        start = time.perf_counter()
        tasks = [asyncio.create_task(user()) for _ in range(concurrency)]
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.monotonic()))
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        wall = time.perf_counter() - start
    return summarize(concurrency, results, len(pending), wall)


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The header a server started with `serve --api-key KEY` asks every request for."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def server_model(url: str, api_key: str | None = None) -> str:
    """The server's default model (the first /v1/models entry)."""
    try:
        r = httpx.get(f"{url}/v1/models", timeout=10, trust_env=False, headers=auth_headers(api_key))
    except httpx.HTTPError as e:
        raise DraftsmithError(f"no draftsmith server answers at {url}: {e}") from e
    if r.status_code == 401:
        hint = (
            "the key given was refused"
            if api_key
            else "pass --api-key KEY (the key `serve --api-key` was given)"
        )
        raise DraftsmithError(f"the server at {url} asks for an API key: {hint}")
    try:
        r.raise_for_status()
        return r.json()["data"][0]["id"]
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
        raise DraftsmithError(f"no draftsmith server answers at {url}: {e}") from e


def server_tau(url: str, api_key: str | None = None) -> dict[str, float]:
    """Pooled tau per method from the server's /metrics (empty if unavailable)."""
    try:
        text = httpx.get(f"{url}/metrics", timeout=10, trust_env=False, headers=auth_headers(api_key)).text
    except httpx.HTTPError:
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith('draftsmith_tau{method="'):
            name, value = line.rsplit(" ", 1)
            out[name[len('draftsmith_tau{method="') : -2]] = float(value)
    return out


def run_loadtest(
    url: str,
    prompts: list[tuple[str, bool]],
    concurrencies: list[int],
    n_requests: int,
    max_tokens: int,
    time_limit: float,
    *,
    model: str | None = None,
    temperature: float = 0.0,
    timeout: float = 300.0,
    log=print,
    api_key: str | None = None,
) -> dict:
    """Run every level in turn within `time_limit` seconds overall; returns the JSON report."""
    if not prompts:
        raise DraftsmithError("no prompts to send")
    url = url.rstrip("/")
    model = model or server_model(url, api_key)
    deadline = time.monotonic() + time_limit
    levels = []
    for c in concurrencies:
        if time.monotonic() >= deadline:
            log(f"time limit reached: concurrency {c} and above not run")
            break
        level = asyncio.run(
            run_level(
                url,
                model,
                prompts,
                c,
                n_requests,
                max_tokens,
                temperature,
                deadline,
                timeout,
                auth_headers(api_key),
            )
        )
        log(
            f"concurrency {c}: {level.ok}/{level.sent} ok, {level.errors} errors, {level.cut} cut, "
            f"{level.total_tok_s:.1f} tok/s total, {level.per_user_tok_s_p50:.1f} tok/s per user (p50)"
        )
        levels.append(asdict(level))
    return {
        "url": url,
        "model": model,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "requests_per_level": n_requests,
        "time_limit_s": time_limit,
        "server_tau": server_tau(url, api_key),
        "levels": levels,
    }


def markdown(report: dict) -> str:
    head = (
        "| users | ok/sent | errors | cut | total tok/s | per-user tok/s p50 | p10 | streaming tok/s p50 "
        "| TTFT s p50 | p99 | latency s p50 | p99 |"
    )
    rows = [head, "|" + "---|" * 12]
    for lv in report["levels"]:
        rows.append(
            f"| {lv['concurrency']} | {lv['ok']}/{lv['sent']} | {lv['errors']} | {lv['cut']} | "
            f"{lv['total_tok_s']:.1f} | {lv['per_user_tok_s_p50']:.1f} | {lv['per_user_tok_s_p10']:.1f} | "
            f"{lv['stream_tok_s_p50']:.1f} | {lv['ttft_s_p50']:.3f} | {lv['ttft_s_p99']:.3f} | "
            f"{lv['latency_s_p50']:.3f} | {lv['latency_s_p99']:.3f} |"
        )
    return "\n".join(rows)


def curve_labels(reports: list[dict]) -> list[str]:
    """One legend name per report: its label (default: the model id), with the results file it came
    from (or "this run") where two reports would otherwise share a name."""
    names = [r.get("label") or r["model"] for r in reports]
    return [
        f"{n} ({r.get('source', 'this run')})" if names.count(n) > 1 else n
        for n, r in zip(names, reports, strict=True)
    ]


def plot(reports: list[dict], path: str | Path) -> bool:
    """Per-user tok/s (p50) against total tok/s, one curve per report; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    for report, label in zip(reports, curve_labels(reports), strict=True):
        levels = report["levels"]
        xs = [lv["total_tok_s"] for lv in levels]
        ys = [lv["per_user_tok_s_p50"] for lv in levels]
        ax.plot(xs, ys, marker="o", label=label)
        for lv, x, y in zip(levels, xs, ys, strict=True):
            ax.annotate(str(lv["concurrency"]), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("total throughput (tok/s)")
    ax.set_ylabel("per-user speed, p50 (tok/s)")
    ax.set_title("draftsmith loadtest (points: concurrent users)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def parse_concurrency(text: str) -> list[int]:
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or any(c < 1 for c in levels):
        raise DraftsmithError(f"--concurrency takes positive integers like 1,2,4,8, got {text!r}")
    return levels


def load_prompts(suites: str, limit: int) -> list[tuple[str, bool]]:
    """(text, chat) pairs from draftsmith's suites (names or .jsonl files), `limit` per suite,
    interleaved (one from each suite in turn), so the first n requests of a level mix the suites."""
    from draftsmith.evaluation.suites import load_suite

    names = [s.strip() for s in suites.split(",") if s.strip()]
    per_suite = [[(p.text, p.chat) for p in load_suite(name, limit)] for name in names]
    return [pair for turn in zip_longest(*per_suite) for pair in turn if pair is not None]


def main(args) -> int:
    """The `draftsmith loadtest` command (args from its parser in cli/serve.py)."""
    levels = parse_concurrency(args.concurrency)
    for flag, value in (("--requests", args.requests), ("--max-tokens", args.max_tokens)):
        if value < 1:
            raise DraftsmithError(f"{flag} must be >= 1, got {value}")
    if args.time_limit <= 0:
        raise DraftsmithError(f"--time-limit must be > 0, got {args.time_limit}")
    missing = [p for p in args.compare or [] if not Path(p).is_file()]
    if missing:
        raise DraftsmithError(f"--compare: no such results file: {missing[0]}")
    prompts = load_prompts(args.suite, args.requests)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    report = run_loadtest(
        args.url,
        prompts,
        levels,
        args.requests,
        args.max_tokens,
        args.time_limit,
        model=args.model,
        temperature=args.temperature,
        timeout=args.timeout,
        log=log,
        api_key=args.api_key,
    )
    report["label"] = args.label or report["model"]
    report["suite"] = args.suite
    print(markdown(report))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
        log(f"saved {args.out}")
    if args.plot:
        others = [{**json.loads(Path(p).read_text()), "source": Path(p).name} for p in args.compare or []]
        if plot([report, *others], args.plot):
            log(f"saved {args.plot}")
        else:
            log("matplotlib is not installed: no plot (pip install matplotlib)")
    return 0
