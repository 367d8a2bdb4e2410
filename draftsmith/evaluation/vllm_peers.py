"""vLLM as a bench peer: `vllm serve` (its CPU build, deploy/vllm.py) on the same prompt tokens.

Each peer is one vLLM server on loopback, started with the launch line EXPORT.md prints: plain
decoding, its own n-gram drafting, or one of our drafters as `export --format speculators` writes it,
under `--speculative-config`. Requests are greedy token-id prompts, one at a time, with prefix caching
off so every run prefills as our engine does. Time is the request's wall time on loopback. Accepted
length comes from vLLM's own spec-decode counters (/metrics) around each request: vLLM counts it per
drafted round (rounds with no proposal, frequent for n-gram, do not count); the bench's tau is per
target step (tokens / (tokens - accepted drafts)), and both are kept.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from draftsmith.engine.stats import GenerationStats
from draftsmith.errors import DraftsmithError
from draftsmith.evaluation.servers import free_port, wait_healthy

PREFIX = "vllm-"
PEERS = ("vllm-plain", "vllm-ngram", "vllm-dflash", "vllm-dspark", "vllm-eagle3", "vllm-draft-model")
DRAFT_MODEL = "distilled"  # the method whose drafters vLLM runs as a draft model (an HF directory)
DRAFT_MAX = 3  # drafts a round, as our default CPU mode and the llama.cpp peers verify
COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "drafted": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


class PeerUnavailable(DraftsmithError):
    """vLLM cannot run this peer here (its reason, one line): the bench says so and goes on."""


def speculative_config(name: str, target, drafters: dict, k: int = DRAFT_MAX) -> dict | None:
    """The --speculative-config of a peer (None: plain), our drafters exported for vLLM first."""
    if name == "vllm-plain":
        return None
    if name == "vllm-ngram":
        return {
            "method": "ngram",
            "num_speculative_tokens": k,
            "prompt_lookup_min": 1,
            "prompt_lookup_max": 3,
        }
    if name == "vllm-draft-model":  # a small LM of the target's vocabulary, as vLLM's draft_model
        if not drafters.get(DRAFT_MODEL):
            raise PeerUnavailable(
                f"{name} needs a trained draft model (--drafter {DRAFT_MODEL}=DIR); none ships for it"
            )
        model = exported(DRAFT_MODEL, drafters[DRAFT_MODEL], target, "hf")
        return {"method": "draft_model", "model": str(model), "num_speculative_tokens": k}
    method = name.removeprefix(PREFIX)
    return {
        "method": method,
        "model": str(exported(method, drafters.get(method), target)),
        "num_speculative_tokens": k,
    }


def exported(method: str, directory, target, fmt: str = "speculators") -> Path:
    """Our drafter as vLLM runs it (speculators; a draft model as a plain HF directory), once."""
    from draftsmith.evaluation.llamacpp_peers import engine_export

    return engine_export(method, directory, target, fmt)


def target_directory(target) -> str:
    """The target as vLLM loads it: an HF directory or hub id (a GGUF target's converted directory)."""
    from draftsmith.models.loading import hf_directory

    return hf_directory(target.source)


def metrics(port: int) -> dict[str, float]:
    """vLLM's cumulative spec-decode counters (drafted rounds, drafted and accepted tokens, and
    accepted tokens by draft position as "pos0", "pos1", ...)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for key, name in COUNTERS.items():
        values = re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
        out[key] = sum(float(v) for v in values)
    for pos, value in re.findall(
        rf'^{PER_POSITION}{{[^}}]*position="(\d+)"[^}}]*}} ([0-9.e+]+)$', text, re.M
    ):
        out[f"pos{pos}"] = out.get(f"pos{pos}", 0.0) + float(value)
    return out


class VllmPeer:
    """One `vllm serve` configuration; `run` returns (new tokens, seconds, stats or None)."""

    def __init__(
        self, name: str, model: Path, spec: dict | None, dtype: str, threads: int, log: Path, eos
    ) -> None:
        from draftsmith.deploy import vllm

        self.name, self.eos, self.log = name, eos, log
        self.port = free_port()
        cmd = vllm.server_command(
            str(model),
            self.port,
            "--dtype",
            dtype,
            "--max-model-len",
            "2048",
            "--max-num-seqs",
            "1",
            "--no-enable-prefix-caching",
            "--served-model-name",
            "target",
        )
        if spec is not None:
            cmd += ["--speculative-config", json.dumps(spec)]
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": str(threads)}
        env.pop("PYTHONPATH", None)
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env)
        self._wait_ready()
        self.run([1, 2, 3, 4], 8)  # warm up outside the timings

    def _wait_ready(self, timeout: float = 600.0) -> None:
        state = wait_healthy(self.proc, self.port, timeout, poll=0.5)
        if state == "exited":
            raise PeerUnavailable(f"{self.name}: vLLM exited: {self.reason()}")
        if state == "timeout":
            self.close()
            raise DraftsmithError(
                f"vLLM for {self.name} did not start within {timeout:.0f} s (log: {self.log})"
            )

    def reason(self) -> str:
        """vLLM's own error from its log: the message of its last `Value error` or exception line."""
        lines = [x.strip() for x in self.log.read_text(errors="replace").splitlines() if x.strip()]
        for marker in ("Value error, ", "Error: ", "Error:"):
            found = [x for x in lines if marker in x and "errors.pydantic.dev" not in x]
            if found:
                return found[-1].split(marker, 1)[1].split(" [type=")[0][:300]
        return (lines[-1] if lines else "(no output)")[:300]

    def run(self, ids: list[int], max_new_tokens: int) -> tuple[list[int], float, GenerationStats | None]:
        before = metrics(self.port) if self.name != "vllm-plain" else None
        body = {
            "model": "target",
            "prompt": ids,
            "max_tokens": max_new_tokens,
            "temperature": 0.0,
            "return_token_ids": True,
        }
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=600) as r:
            out = json.loads(r.read())
        seconds = time.perf_counter() - t0
        tokens = [int(x) for x in out["choices"][0].get("token_ids") or []]
        while tokens and tokens[-1] in self.eos:
            tokens.pop()
        if before is None:
            return tokens, seconds, None
        after = metrics(self.port)
        drafts, drafted, accepted = (int(after[k] - before[k]) for k in ("drafts", "drafted", "accepted"))
        n = len(out["choices"][0].get("token_ids") or [])
        stats = GenerationStats(new_tokens=n, rounds=max(n - accepted, 1), drafted=drafted)
        stats.accepted, stats.produced, stats.total_s = accepted, n, seconds
        positions = sorted(int(k[3:]) for k in after if k.startswith("pos"))
        by_position = [int(after[f"pos{i}"] - before.get(f"pos{i}", 0.0)) for i in positions]
        # rounds that drafted each position: every one where every round drafted the full length
        # (DFlash, EAGLE-3); else only the first position is known (n-gram drafts up to k)
        full = drafted == drafts * len(positions)
        stats.drafted_at = [drafts] * (len(positions) if full else 1)
        stats.accepted_at = by_position[: len(stats.drafted_at)]
        return tokens, seconds, stats

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def start_peers(
    names: list[str], target, drafters: dict, threads: int, log_dir: Path
) -> tuple[dict[str, VllmPeer], dict[str, str]]:
    """One running vLLM server per peer (the caller closes them), in the target's dtype, and the
    peers vLLM refused here with its reason (e.g. DSpark, which only its Triton runner has)."""
    model = target_directory(target)
    dtype = str(next(target.model.parameters()).dtype).removeprefix("torch.")
    log_dir.mkdir(parents=True, exist_ok=True)
    peers: dict[str, VllmPeer] = {}
    refused: dict[str, str] = {}
    try:
        for name in names:
            try:
                spec = speculative_config(name, target, drafters)
                peers[name] = VllmPeer(
                    name, model, spec, dtype, threads, log_dir / f"{name}.log", target.eos_ids
                )
            except PeerUnavailable as e:
                refused[name] = str(e)
    except BaseException:
        for p in peers.values():
            p.close()
        raise
    return peers, refused
