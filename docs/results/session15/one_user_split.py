"""Issue 9, one user: where the server's gap to `generate` goes. Against one running server, the
one-user check's prompts (16 x 64 tokens, sent one at a time) streamed (SSE, as the loadtest sends
them) and not, and in-process `generate` on the same prompts, interleaved for ROUNDS rounds. The
server's own time per request comes from its /metrics latency histogram (submit to last token:
the engine's decode plus the hand-over of the text, without HTTP parsing, tokenising, or the
client); the client's wall time holds everything. So per round:
  generate tok/s | server-side tok/s and client tok/s, streamed | the same, not streamed.
Usage: python docs/results/session15/one_user_split.py URL METHOD [ROUNDS] [OUT.json]
(the server runs METHOD alone, started beforehand; nothing else should run)."""

import asyncio
import json
import re
import statistics
import sys
import time

import httpx

from draftsmith.api import generate, load_target
from draftsmith.drafters.registry import build_drafter
from draftsmith.serving.loadtest import load_prompts, one_request

url, method = sys.argv[1], sys.argv[2]
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
out_path = sys.argv[4] if len(sys.argv) > 4 else None
N, TOKENS = 16, 64
prompts = load_prompts("mtbench,humaneval,gsm", N)[:N]  # what server_vs_generate.py sends
target = load_target(dtype="float32")  # the CPU default until session 18
drafter = build_drafter(method, target)


def server_seconds() -> float:
    """The server's summed request latency so far (submit to last token)."""
    text = httpx.get(f"{url}/metrics", trust_env=False).text
    return float(re.search(r"^draftsmith_request_latency_seconds_sum (\S+)$", text, re.M).group(1))


async def serve(stream: bool) -> tuple[int, float]:
    tokens, t0 = 0, time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=600, trust_env=False) as client:
        model = (await client.get("/v1/models")).json()["data"][0]["id"]
        t0 = time.perf_counter()
        for text, chat in prompts:
            if stream:
                tokens += (await one_request(client, model, text, chat, TOKENS, 0.0)).completion_tokens
                continue
            body = {"model": model, "max_tokens": TOKENS, "temperature": 0.0}
            if chat:
                path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": text}]
            else:
                path, body["prompt"] = "/v1/completions", text
            tokens += (await client.post(path, json=body)).json()["usage"]["completion_tokens"]
    return tokens, time.perf_counter() - t0


def in_process() -> float:
    tokens, seconds = 0, 0.0
    for text, chat in prompts:
        t0 = time.perf_counter()
        done = generate(target, text, drafter.fork(), max_new_tokens=TOKENS, chat=chat)
        seconds += time.perf_counter() - t0
        tokens += len(done.tokens)
    return tokens / seconds


rows = []
for r in range(rounds):
    row = {"round": r, "generate": in_process()}
    for stream in (True, False):
        kind = "streamed" if stream else "plain_http"
        before = server_seconds()
        tokens, wall = asyncio.run(serve(stream))
        row[f"{kind}_client"] = tokens / wall
        row[f"{kind}_server"] = tokens / (server_seconds() - before)
    rows.append(row)
    print(json.dumps({k: round(v, 2) for k, v in row.items()}), flush=True)
keys = [k for k in rows[0] if k != "round"]
summary = {k: statistics.median(row[k] for row in rows) for k in keys}
ratios = {k: statistics.median(row[k] / row["generate"] for row in rows) for k in keys if k != "generate"}
print(
    f"{method}, medians of {rounds} rounds (tok/s): " + ", ".join(f"{k} {v:.1f}" for k, v in summary.items())
)
print("median of per-round ratios to generate: " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()))
if out_path:
    json.dump(
        {"method": method, "rows": rows, "summary": summary, "ratios": ratios}, open(out_path, "w"), indent=1
    )
