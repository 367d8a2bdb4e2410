"""The OpenAI-compatible server, end to end: the real uvicorn server on a free port of 127.0.0.1,
driven by the official `openai` client and by httpx. Every wait is bounded in count and time."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
from conftest import tiny_target

from draftsmith.api import generate
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.serving.app import create_app
from draftsmith.serving.batch_worker import BatchWorker
from draftsmith.serving.prompts import PromptEncoder
from draftsmith.serving.server import BackgroundServer, build_app
from draftsmith.serving.worker import SerialWorker

MODEL = "tiny-llama-0"  # tiny_target()'s name: the default model serves the first method (plain)
MAX_TOKENS = 24
PROMPTS = [" ".join(f"t{(7 * i + 5 * j) % 90 + 3}" for j in range(4 + i % 5)) for i in range(16)]


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def openai_client(url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{url}/v1",
        api_key="unused",
        max_retries=0,
        timeout=60,
        http_client=httpx.Client(trust_env=False, timeout=60),
    )


ENGINES = {
    "serial": dict(max_batch=1),  # one request at a time, any backend
    # continuous batching, confidence-scheduled, with a cost table that makes the scheduler cut drafts
    "batched": dict(max_batch=4, schedule="confidence", cost=lambda b, rows: 1.0 + 0.05 * b * rows),
    # the default: a request finding the server idle decodes alone, later ones batch meanwhile
    "adaptive": dict(max_batch=4, cost=lambda b, rows: 1.0 + 0.05 * b * rows, solo=True),
}


@pytest.fixture(scope="module", params=list(ENGINES))
def server(request) -> Iterator[str]:
    settings, target = dict(ENGINES[request.param]), tiny_target()
    if settings.pop("solo", False):
        settings["solo_target"] = target
    app = build_app(target, ["plain", "ngram"], max_queue=64, **settings)
    with BackgroundServer(app) as url:
        assert url.startswith("http://127.0.0.1:")
        yield url


@pytest.fixture(scope="module")
def client(server: str) -> openai.OpenAI:
    return openai_client(server)


@pytest.fixture(scope="module")
def http(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, trust_env=False, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def reference() -> Callable[..., object]:
    """Single-request decoding through draftsmith's own `generate` (its own copy of the target)."""
    target = tiny_target()

    def decode(prompt: str, method: str = "plain", **kw):
        return generate(target, prompt, method, max_new_tokens=MAX_TOKENS, **kw)

    return decode


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    if code:
        assert error["code"] == code
    return error


# -- completions ---------------------------------------------------------------------------------


def test_models_and_health(client, http):
    ids = {m.id for m in client.models.list()}
    assert ids == {MODEL, f"{MODEL}:plain", f"{MODEL}:ngram"}
    health = http.get("/health")
    assert health.status_code == 200
    body = health.json()
    assert (body["status"], body["model"], body["methods"]) == ("ok", MODEL, ["plain", "ngram"])
    assert (
        body["max_batch"] in (1, 4)
        and body["queue_depth"] >= 0
        and 0 <= body["batch_size"] <= body["max_batch"]
    )


@pytest.mark.parametrize("model", [MODEL, f"{MODEL}:ngram"])
def test_chat_streamed_and_not_equal_generate(client, reference, model):
    prompt = PROMPTS[0]
    ref = reference(prompt)
    kw = dict(
        model=model, messages=[{"role": "user", "content": prompt}], max_tokens=MAX_TOKENS, temperature=0
    )
    out = client.chat.completions.create(**kw)
    assert out.choices[0].message.content == ref.text
    assert out.choices[0].finish_reason == ("length" if ref.finish_reason == "length" else "stop")
    assert out.usage.prompt_tokens == len(prompt.split())
    assert out.usage.completion_tokens == len(ref.tokens)
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens

    chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == out.choices[0].message.content
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1  # really streamed
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == [
        out.choices[0].finish_reason
    ]
    assert chunks[-1].usage.model_dump() == out.usage.model_dump()


@pytest.mark.parametrize("model", [MODEL, f"{MODEL}:ngram"])
def test_completions_streamed_and_not_equal_generate(client, reference, model):
    prompt = PROMPTS[1]
    ref = reference(prompt, chat=False)
    out = client.completions.create(model=model, prompt=prompt, max_tokens=MAX_TOKENS, temperature=0)
    assert out.choices[0].text == ref.text
    assert out.usage.completion_tokens == len(ref.tokens)
    stream = client.completions.create(
        model=model, prompt=prompt, max_tokens=MAX_TOKENS, temperature=0, stream=True
    )
    assert "".join(c.choices[0].text for c in stream) == ref.text


def test_stop_string_and_token_prompt(client, reference):
    prompt = PROMPTS[2]
    free = reference(prompt, chat=False)
    stop = free.text.split()[len(free.tokens) // 2]  # a token the answer writes half-way
    ref = reference(prompt, chat=False, stop=(stop,))
    assert ref.finish_reason == "stop" and len(ref.tokens) < len(free.tokens)
    kw = dict(model=f"{MODEL}:ngram", max_tokens=MAX_TOKENS, temperature=0, stop=[stop])
    out = client.completions.create(prompt=prompt, **kw)
    assert (out.choices[0].text, out.choices[0].finish_reason) == (ref.text, "stop")
    streamed = "".join(c.choices[0].text for c in client.completions.create(prompt=prompt, stream=True, **kw))
    assert streamed == ref.text
    ids = [int(w[1:]) for w in prompt.split()]  # the same prompt as token ids
    assert client.completions.create(prompt=ids, **kw).choices[0].text == ref.text


def test_seeded_sampling_is_reproducible_and_lossless(client, reference):
    prompt = PROMPTS[3]
    kw = dict(temperature=0.8, top_p=0.9, seed=7)
    ref = reference(prompt, "ngram", **kw)
    texts = {
        client.chat.completions.create(
            model=f"{MODEL}:ngram",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=MAX_TOKENS,
            **kw,
        )
        .choices[0]
        .message.content
        for _ in range(2)
    }
    assert texts == {ref.text}


def test_sixteen_concurrent_requests_equal_single_plain_decoding(server, reference):
    expected = [reference(p).text for p in PROMPTS]
    client = openai_client(server)

    def ask(i: int) -> str:
        model = f"{MODEL}:ngram" if i % 2 else MODEL
        out = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": PROMPTS[i]}],
            max_tokens=MAX_TOKENS,
            temperature=0,
        )
        return out.choices[0].message.content

    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(ask, i) for i in range(16)]
        answers = [f.result(timeout=90) for f in futures]
    assert answers == expected


def test_the_adaptive_worker_serves_a_lone_request_alone_and_batches_the_rest(reference):
    """One request on an idle server takes the single-request path; eight at once put one there and
    batch the others between its rounds; every answer is still plain decoding's."""
    target = tiny_target()
    app = build_app(
        target, ["plain", "ngram"], max_batch=4, solo_target=tiny_target(seed=0), schedule="fixed"
    )
    worker = app.state.worker
    expected = [reference(p).text for p in PROMPTS[:8]]
    with BackgroundServer(app) as url:
        client = openai_client(url)

        def ask(i: int) -> str:
            out = client.chat.completions.create(
                model=f"{MODEL}:ngram" if i % 2 else MODEL,
                messages=[{"role": "user", "content": PROMPTS[i]}],
                max_tokens=MAX_TOKENS,
                temperature=0,
            )
            return out.choices[0].message.content

        assert ask(0) == expected[0] and worker.paths == {"solo": 1, "batch": 0}
        with ThreadPoolExecutor(8) as pool:
            answers = [f.result(timeout=90) for f in [pool.submit(ask, i) for i in range(8)]]
    assert answers == expected
    assert worker.paths["solo"] >= 2 and worker.paths["batch"] >= 1 and sum(worker.paths.values()) == 9


# -- bad input -----------------------------------------------------------------------------------

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "t5 t6"}], "max_tokens": 4}


def test_malformed_json_is_400(http):
    r = http.post("/v1/chat/completions", content=b'{"model": ', headers={"content-type": "application/json"})
    assert "malformed JSON" in assert_error(r, 400, "invalid_json")["message"]
    assert_error(
        http.post("/v1/completions", content=b"[1, 2]", headers={"content-type": "application/json"}), 400
    )


def test_unknown_model_is_404(http, client):
    error = assert_error(
        http.post("/v1/chat/completions", json=CHAT | {"model": "gpt-4"}), 404, "model_not_found"
    )
    assert error["param"] == "model" and error["type"] == "invalid_request_error"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="t1 t2", max_tokens=2)


@pytest.mark.parametrize(
    "change, param",
    [
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.01}, "top_p"),
        ({"n": 2}, "n"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": "many"}, "max_tokens"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "t1"}]}, "messages.0.role"),
        ({"messages": [{"role": "user", "content": "   "}]}, "messages"),
        ({"stop": [""]}, "stop"),
        ({"model": None}, "model"),
        ({"presence_penalty": 0.5}, None),
    ],
)
def test_invalid_parameters_are_400(http, change, param):
    error = assert_error(http.post("/v1/chat/completions", json=CHAT | change), 400)
    assert error["param"] == param and error["type"] == "invalid_request_error"


def test_prompt_longer_than_the_context_is_400(http, client):
    long = " ".join(["t9"] * 300)  # the tiny model holds 256 positions
    r = http.post("/v1/completions", json={"model": MODEL, "prompt": long})
    assert "256" in assert_error(r, 400, "context_length_exceeded")["message"]
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": long}])


# -- faults: a failing request, a full queue, a client that leaves --------------------------------


class GateDrafter(PlainDrafter):
    """Holds the worker inside a request until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()

    def start(self, prompt, hidden, max_len) -> None:
        self.entered.set()
        assert self.gate.wait(timeout=30)


class BrokenDrafter(PlainDrafter):
    def start(self, prompt, hidden, max_len) -> None:
        raise RuntimeError("drafter exploded")


class SlowDrafter(PlainDrafter):
    """Plain decoding at ~40 tokens/s, so a stream is still running when its client leaves."""

    def accept(self, tokens, n_new, hidden) -> None:
        time.sleep(0.025)


@pytest.fixture(scope="module", params=list(ENGINES))
def faulty(request) -> Iterator[tuple[str, SerialWorker, GateDrafter]]:
    target = tiny_target()
    gate = GateDrafter()
    drafters = {"plain": PlainDrafter(), "gate": gate, "broken": BrokenDrafter(), "slow": SlowDrafter()}
    if request.param == "serial":
        engine = SerialWorker(target, drafters, max_queue=1)
    else:  # the gate holds the engine thread in its prefill, so the queue fills the same way
        engine = BatchWorker(target, drafters, max_batch=2, max_queue=1, schedule="fixed")
    with BackgroundServer(create_app(engine, PromptEncoder(target), MODEL)) as url:
        yield url, engine, gate
    gate.gate.set()


def test_a_failing_request_errors_alone(faulty):
    url, engine, _ = faulty
    errors = engine.metrics.requests["error"]
    with httpx.Client(base_url=url, trust_env=False, timeout=30) as http:
        r = http.post("/v1/chat/completions", json=CHAT | {"model": f"{MODEL}:broken"})
        assert "drafter exploded" in assert_error(r, 500)["message"]
        streamed = http.post(
            "/v1/completions", json={"model": f"{MODEL}:broken", "prompt": "t3", "stream": True}
        )
        assert (
            streamed.status_code == 200
            and '"error"' in streamed.text
            and streamed.text.endswith("[DONE]\n\n")
        )
        assert http.post("/v1/chat/completions", json=CHAT).status_code == 200
        assert http.get("/health").json()["status"] == "ok"
    assert engine.metrics.requests["error"] == errors + 2


def test_a_full_queue_answers_429(faulty):
    url, engine, gate = faulty
    gate.gate.clear()
    gate.entered.clear()
    rejected = engine.metrics.requests["rejected"]
    results: dict[str, httpx.Response] = {}

    def post(name: str, model: str) -> None:
        with httpx.Client(base_url=url, trust_env=False, timeout=30) as h:
            results[name] = h.post("/v1/chat/completions", json=CHAT | {"model": model})

    threads = [threading.Thread(target=post, args=("held", f"{MODEL}:gate"))]
    threads[0].start()
    try:
        assert gate.entered.wait(timeout=10)  # the worker is inside the held request
        threads.append(threading.Thread(target=post, args=("queued", MODEL)))
        threads[1].start()
        wait_until(lambda: engine.queue_depth == 1)
        with httpx.Client(base_url=url, trust_env=False, timeout=30) as http:
            r = http.post("/v1/chat/completions", json=CHAT)
            assert_error(r, 429, "queue_full")
            assert r.headers["retry-after"] == "1"
            assert "draftsmith_queue_depth 1" in http.get("/metrics").text
        with pytest.raises(openai.RateLimitError):
            openai_client(url).completions.create(model=MODEL, prompt="t1", max_tokens=2)
    finally:
        gate.gate.set()
        for thread in threads:
            thread.join(timeout=30)
    assert results["held"].status_code == 200 and results["queued"].status_code == 200
    assert engine.metrics.requests["rejected"] == rejected + 2


def test_a_client_leaving_mid_stream_frees_the_worker(faulty):
    url, engine, _ = faulty
    before = engine.metrics.requests["cancelled"]
    body = {"model": f"{MODEL}:slow", "prompt": "t4 t5", "max_tokens": 200, "temperature": 0, "stream": True}
    with httpx.Client(base_url=url, trust_env=False, timeout=30) as leaving:
        with leaving.stream("POST", "/v1/completions", json=body) as r:
            assert r.status_code == 200
            for line in r.iter_lines():  # read until the first text arrives, then hang up
                if line.startswith("data: ") and json.loads(line[6:])["choices"][0]["text"]:
                    break
    left = time.monotonic()
    wait_until(lambda: engine.metrics.requests["cancelled"] == before + 1, timeout=3)
    with httpx.Client(base_url=url, trust_env=False, timeout=30) as http:
        assert http.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert time.monotonic() - left < 3  # 200 slow tokens would have taken over 5 s
    wait_until(lambda: engine.batch_size == 0 and engine.queue_depth == 0, timeout=1)


def test_a_client_leaving_a_non_streamed_request_frees_the_worker(faulty):
    url, engine, _ = faulty
    before = engine.metrics.requests["cancelled"]
    body = {"model": f"{MODEL}:slow", "prompt": "t4 t5", "max_tokens": 200, "temperature": 0}
    with httpx.Client(base_url=url, trust_env=False, timeout=0.5) as impatient:
        with pytest.raises(httpx.ReadTimeout):
            impatient.post("/v1/completions", json=body)
    left = time.monotonic()
    wait_until(lambda: engine.metrics.requests["cancelled"] == before + 1, timeout=3)
    wait_until(lambda: engine.batch_size == 0, timeout=1)
    assert time.monotonic() - left < 3  # 200 slow tokens would have taken over 5 s


# -- metrics ---------------------------------------------------------------------------------------


def test_metrics_report_requests_tokens_and_acceptance(client, http):
    prompt = "t10 t11 t12 t10 t11 t12 t10 t11"  # repetitive: the n-gram drafter gets to draft
    client.completions.create(model=f"{MODEL}:ngram", prompt=prompt, max_tokens=MAX_TOKENS, temperature=0)
    assert http.post("/v1/completions", json={"model": MODEL, "prompt": "t1", "top_p": 2}).status_code == 400
    r = http.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    samples = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    assert samples['draftsmith_requests_total{outcome="ok"}'] >= 1
    assert samples['draftsmith_requests_total{outcome="invalid"}'] >= 1
    assert samples["draftsmith_completion_tokens_total"] >= MAX_TOKENS
    assert samples["draftsmith_prompt_tokens_total"] >= 8
    assert samples["draftsmith_queue_depth"] == 0 and samples["draftsmith_max_batch_size"] in (1, 4)
    assert samples['draftsmith_tau{method="ngram"}'] >= 1.0
    assert samples['draftsmith_tau{method="plain"}'] == 1.0
    assert samples['draftsmith_drafted_tokens_total{method="ngram"}'] >= 1
    assert 0 <= samples['draftsmith_acceptance_by_position{method="ngram",position="1"}'] <= 1
    assert samples["draftsmith_request_latency_seconds_count"] >= 1
    assert samples['draftsmith_time_to_first_token_seconds_bucket{le="+Inf"}'] >= 1
    for kind in ("# TYPE draftsmith_requests_total counter", "# TYPE draftsmith_queue_depth gauge"):
        assert kind in r.text


# -- the command line: serve's checks, and a short load test against the running server -----------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["serve", "--method", "warp"], "unknown method"),
        (["serve", "--max-batch", "0"], "max-batch"),
        (["serve", "--max-len", "1"], "max-len"),
        (["serve", "--max-queue", "0"], "max-queue"),
        (["serve", "--draft-margin", "-0.1"], "draft-margin"),
        (["serve", "--stream-interval-ms", "-1"], "stream-interval"),
        (["loadtest", "--concurrency", "1,zero"], "concurrency"),
        (["loadtest", "--requests", "0"], "requests"),
    ],
)
def test_cli_refuses_bad_settings_before_loading(capsys, argv, message):
    from draftsmith.cli import main

    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_loadtest_drives_the_server(server, tmp_path, capsys):
    from draftsmith.cli import main

    suite = tmp_path / "tiny.jsonl"
    suite.write_text(
        "\n".join(json.dumps({"prompt": p, "chat": i % 2 == 0}) for i, p in enumerate(PROMPTS[:4]))
    )
    out, png = tmp_path / "load.json", tmp_path / "load.png"
    argv = ["loadtest", "--url", server, "--concurrency", "1,3", "--suite", str(suite), "--requests", "3"]
    argv += ["--max-tokens", "8", "--time-limit", "60", "--out", str(out), "--plot", str(png)]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["model"] == MODEL and [lv["concurrency"] for lv in report["levels"]] == [1, 3]
    for level in report["levels"]:
        assert (level["sent"], level["ok"], level["errors"], level["cut"]) == (3, 3, 0, 0)
        assert level["completion_tokens"] > 0 and level["total_tok_s"] > 0
        assert 0 < level["per_user_tok_s_p10"] <= level["per_user_tok_s_p50"]
        assert 0 < level["ttft_s_p50"] <= level["latency_s_p99"]
    assert "plain" in report["server_tau"]
    assert "| users |" in capsys.readouterr().out
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_loadtest_prompts_take_the_suites_in_turn(tmp_path):
    """A level sends the first n prompts: they must mix the suites, not exhaust the first one."""
    from draftsmith.serving.loadtest import load_prompts

    for name, n in (("a", 3), ("b", 1)):
        (tmp_path / f"{name}.jsonl").write_text(
            "\n".join(json.dumps({"prompt": f"{name}{i}", "chat": True}) for i in range(n))
        )
    prompts = load_prompts(f"{tmp_path / 'a.jsonl'},{tmp_path / 'b.jsonl'}", 3)
    assert [text for text, _ in prompts] == ["a0", "b0", "a1", "a2"]


@pytest.mark.parametrize("interval", [0.0, 60.0])
def test_streamed_text_emitted_close_together_is_merged_and_nothing_is_lost(interval):
    """Deltas within the stream interval of the last hand-over join the next one (fewer wakeups
    of the event loop and the client); the end hands over what is held first, so the text is whole."""
    import asyncio

    from draftsmith.serving.requests import Finished, GenerationRequest, RequestHandle, TextDelta

    async def run() -> list:
        handle = RequestHandle(GenerationRequest((1, 2), "plain", 8), stream_interval=interval)
        for text in ("a", "b", "c"):
            handle.emit(TextDelta(text))
        handle.emit(Finished("abc", "length", 2, 3))
        return [event async for event in handle.events()]

    events = asyncio.run(run())
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(texts) == "abc" and isinstance(events[-1], Finished)
    assert texts == (["a", "b", "c"] if interval == 0 else ["a", "bc"])  # the first goes at once


def test_api_key_guards_the_api_for_the_openai_client():
    """--api-key: the OpenAI client's Bearer token with the right key is served; a wrong key or none
    is a 401 in OpenAI's shape; /health stays open."""
    app = build_app(tiny_target(), ["plain"], max_batch=1, api_key="s3cret")
    with BackgroundServer(app) as url:
        ok = openai_client(url).with_options(api_key="s3cret")
        out = ok.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=4, temperature=0)
        assert out.choices[0].text is not None and out.usage.completion_tokens > 0
        with pytest.raises(openai.AuthenticationError) as wrong:
            openai_client(url).with_options(api_key="wrong").models.list()
        assert wrong.value.status_code == 401 and wrong.value.code == "invalid_api_key"
        with httpx.Client(base_url=url, trust_env=False, timeout=60) as c:
            none = c.post(
                "/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
            )
            assert none.status_code == 401 and none.json()["error"]["code"] == "invalid_api_key"
            assert c.get("/metrics").status_code == 401 and c.get("/health").status_code == 200


def test_loadtest_sends_the_key_a_guarded_server_asks_for(tmp_path, capsys):
    """`serve --api-key KEY` then `loadtest --api-key KEY` works; without the key loadtest says the
    server wants one (not that no server answers); compared curves of one model get distinct names."""
    from draftsmith.cli import main
    from draftsmith.serving.loadtest import curve_labels

    suite = tmp_path / "tiny.jsonl"
    suite.write_text(json.dumps({"prompt": PROMPTS[0], "chat": False}))
    app = build_app(tiny_target(), ["plain"], max_batch=1, api_key="s3cret")
    with BackgroundServer(app) as url:
        argv = ["loadtest", "--url", url, "--concurrency", "1", "--suite", str(suite), "--requests", "1"]
        argv += ["--max-tokens", "4", "--time-limit", "60", "--out", str(tmp_path / "a.json")]
        assert main(argv) == 2 and "asks for an API key: pass --api-key" in capsys.readouterr().err
        assert main([*argv, "--api-key", "s3cret"]) == 0
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["levels"][0]["ok"] == 1 and "plain" in report["server_tau"]
    other = {**report, "source": "b.json"}
    assert curve_labels([report, other]) == [f"{MODEL} (this run)", f"{MODEL} (b.json)"]
    assert curve_labels([report, {**other, "label": "k=3"}]) == [MODEL, "k=3"]


def test_serving_beyond_loopback_without_a_key_warns(capsys, monkeypatch):
    from unittest.mock import patch

    from draftsmith.cli import main

    monkeypatch.delenv("DRAFTSMITH_API_KEY", raising=False)
    with patch("draftsmith.cli.common.load_target", side_effect=KeyboardInterrupt):  # stop before loading
        assert main(["serve", "--host", "0.0.0.0", "--method", "plain"]) == 130
    assert "without an API key" in capsys.readouterr().err
    with patch("draftsmith.cli.common.load_target", side_effect=KeyboardInterrupt):
        assert main(["serve", "--host", "0.0.0.0", "--method", "plain", "--api-key", "k"]) == 130
    assert "without an API key" not in capsys.readouterr().err
