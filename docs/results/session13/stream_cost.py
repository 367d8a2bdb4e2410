"""Issue 9, one user: what the HTTP path costs. Against one running server (plain), the server-check
prompts (16 x 64 tokens) sent one at a time, streamed (SSE, as the loadtest does) and not, in
alternating rounds; tok/s = completion tokens / wall time. Usage:
python docs/results/session13/stream_cost.py URL [ROUNDS]   (server started beforehand, alone)"""

import asyncio
import statistics
import sys
import time

import httpx

from draftsmith.serving.loadtest import load_prompts, one_request

url, rounds = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
prompts = load_prompts("mtbench,humaneval,gsm", 16)[:16]


async def run(stream: bool) -> float:
    tokens, t0 = 0, time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=600, trust_env=False) as client:
        model = (await client.get("/v1/models")).json()["data"][0]["id"]
        for text, chat in prompts:
            if stream:
                tokens += (await one_request(client, model, text, chat, 64, 0.0)).completion_tokens
            else:
                body = {"model": model, "max_tokens": 64, "temperature": 0.0}
                if chat:
                    path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": text}]
                else:
                    path, body["prompt"] = "/v1/completions", text
                tokens += (await client.post(path, json=body)).json()["usage"]["completion_tokens"]
    return tokens / (time.perf_counter() - t0)


speeds: dict[bool, list[float]] = {True: [], False: []}
for r in range(rounds):
    for stream in (True, False):
        speeds[stream].append(asyncio.run(run(stream)))
        kind = "streamed" if stream else "not streamed"
        print(f"round {r} {kind}: {speeds[stream][-1]:.1f} tok/s", flush=True)
for stream, v in speeds.items():
    print(f"{'streamed' if stream else 'not streamed'}: median {statistics.median(v):.1f} tok/s")
