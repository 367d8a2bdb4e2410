"""One user against a running server: streamed requests, non-streamed requests and in-process
`generate` (plain, 64 tokens, the first 8 loadtest prompts), interleaved, 2 rounds.
Usage: python docs/results/serve-session8/stream_vs_not.py http://127.0.0.1:PORT   (a plain server)"""

import json
import sys
import time

import httpx

from draftsmith.api import generate, load_target
from draftsmith.serving.loadtest import load_prompts

url = sys.argv[1]
target = load_target(dtype="float32")  # the CPU default until session 18
prompts = load_prompts("mtbench,humaneval,gsm", 8)[:8]


def completion_tokens(client: httpx.Client, text: str, stream: bool) -> int:
    body = {"model": "smollm2", "messages": [{"role": "user", "content": text}], "max_tokens": 64}
    body["temperature"] = 0
    if not stream:
        return client.post(url + "/v1/chat/completions", json=body).json()["usage"]["completion_tokens"]
    body |= {"stream": True, "stream_options": {"include_usage": True}}
    tokens = 0
    with client.stream("POST", url + "/v1/chat/completions", json=body) as resp:
        for line in resp.iter_lines():
            if line.startswith("data: {") and '"usage"' in line:
                usage = json.loads(line[6:]).get("usage")
                tokens += usage["completion_tokens"] if usage else 0
    return tokens


with httpx.Client(timeout=300) as client:
    for r in range(2):
        for mode in ("stream", "not streamed", "generate"):
            tokens, t0 = 0, time.perf_counter()
            for text, _ in prompts:
                if mode == "generate":
                    tokens += len(generate(target, text, "plain", max_new_tokens=64, chat=True).tokens)
                else:
                    tokens += completion_tokens(client, text, mode == "stream")
            print(r, mode, round(tokens / (time.perf_counter() - t0), 1), flush=True)
