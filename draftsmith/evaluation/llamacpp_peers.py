"""llama.cpp as a bench peer: llama-server (the pinned build) on the same prompt tokens.

Each peer is one llama-server on loopback: plain decoding, its own n-gram drafting, or one of our
drafters converted to GGUF (draftsmith.export.gguf) under its speculative type. Requests are greedy
token-id prompts with no prompt cache, so every run prefills as our engine does. Time is the
server's own (prompt + generation ms, no HTTP); accepted length comes from its draft counters
(target steps = tokens - accepted drafts); drafting time from its speculative statistics (log
level trace), the rest of a round is verification.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from draftsmith.engine.stats import GenerationStats
from draftsmith.errors import DraftsmithError
from draftsmith.evaluation.servers import free_port, wait_healthy
from draftsmith.paths import data_dir

PREFIX = "llamacpp-"
PEERS = ("llamacpp-plain", "llamacpp-ngram", "llamacpp-dflash", "llamacpp-dspark", "llamacpp-eagle3")
DRAFT_MAX = 3  # drafts a round: what our default CPU mode verifies (4-row steps)
STATS = re.compile(
    r"statistics\s+(\S+): #calls\(b,g,a\) = +(\d+) +(\d+) +(\d+).*?dur\(b,g,a\) = ([\d.]+), ([\d.]+)"
)


ENGINE_PREFIXES = (PREFIX, "vllm-")
"""Bench peers that run in another engine, each measured against that engine's own plain decoding."""


def baseline_of(name: str) -> str | None:
    """The plain run a method's speedup and exactness are measured against in its own engine."""
    for prefix in ENGINE_PREFIXES:
        if name.startswith(prefix) and name != f"{prefix}plain":
            return f"{prefix}plain"
    return None


def drafter_source(method: str, directory: str | Path | None, target) -> Path:
    """The drafter directory a peer runs: the one given, else the method's shipped one for this target."""
    from draftsmith.drafters.checkpoint import shipped_drafter
    from draftsmith.drafters.registry import METHODS

    if method not in METHODS:
        raise DraftsmithError(f"unknown method {method!r}")
    src = Path(directory) if directory else shipped_drafter(method, target)
    if src is None:
        raise DraftsmithError(f"{PREFIX}{method} needs a trained {method} drafter: --drafter {method}=DIR")
    return src


def engine_variant(method: str, src: Path) -> tuple[bool, int | None]:
    """(lookup, draft vocabulary) of the drafter llama.cpp runs: a DFlash/DSpark without its
    prompt-lookup input (no engine but ours computes it), cut to the vocabulary our engine drafts by
    default (FR-Spec) where it carries token counts and its GGUF path takes a draft vocabulary (not
    z-lab's DFlash), so both engines run the same drafter."""
    from draftsmith.drafters.dflash.vocab import default_cut, read_counts
    from draftsmith.export.common import read_config
    from draftsmith.export.gguf import spec_type

    if method not in ("dflash", "dspark"):
        return True, None

    config = read_config(src) or {}
    vocab = config.get("draft_vocab_size") or config.get("target_vocab_size") or 0
    cut = default_cut(read_counts(src), vocab) or None
    if spec_type(method, src) == "draft-dflash":  # through z-lab's format, which has no draft vocabulary
        cut = None
    return not config.get("lookup_input"), cut


def engine_export(method: str, directory: str | Path | None, target, fmt: str) -> Path:
    """Our drafter (a directory, or the method's shipped one) as another engine runs it
    (`engine_variant`), exported once in `fmt` and cached under the data directory by the digest of
    its files: a GGUF file for llama.cpp, a speculators directory for vLLM."""
    import shutil

    from draftsmith.export.methods import export_directory

    src = Path(drafter_source(method, directory, target))
    lookup, cut = engine_variant(method, src)
    files = sorted(p for p in src.iterdir() if p.is_file())
    blob = b"".join(p.name.encode() + p.read_bytes() for p in files) + f"{lookup}{cut}".encode()
    key = hashlib.sha1(blob).hexdigest()[:12]
    out = data_dir() / fmt / (f"{method}-{key}.gguf" if fmt == "gguf" else f"{method}-{key}")
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f"{out.stem}.tmp{out.suffix}")  # a kill leaves no half export behind
        if tmp.is_dir():
            shutil.rmtree(tmp)
        tmp.unlink(missing_ok=True)
        export_directory(src, fmt, tmp, target, None, lookup=lookup, draft_vocab=cut)
        tmp.replace(out)
    return out


def drafter_gguf(method: str, directory: str | Path | None, target) -> Path:
    """Our drafter as llama.cpp runs it, a GGUF converted once and cached."""
    return engine_export(method, directory, target, "gguf")


def completion(port: int, prompt: list[int] | str, max_new_tokens: int) -> dict:
    """One greedy /completion request (no prompt cache, so every request prefills): its JSON reply."""
    body = {
        "prompt": prompt,
        "n_predict": max_new_tokens,
        "temperature": 0.0,
        "top_k": 1,
        "cache_prompt": False,
        "return_tokens": True,
        "stream": False,
    }
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/completion",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


class LlamaServerPeer:
    """One llama-server configuration; `run` returns (new tokens, seconds, stats or None)."""

    def __init__(
        self, name: str, args: list[str], target_gguf: Path, threads: int, log: Path, eos: frozenset[int]
    ) -> None:
        from draftsmith.deploy import llamacpp

        self.name = name
        self.eos = eos  # our engine's outputs end before the end-of-sequence token: so do these
        self.port = free_port()
        self.log = log
        self.offset = 0
        self.last: tuple[int, float] | None = None  # cumulative (draft calls, draft ms)
        cmd = [str(llamacpp.binary("llama-server")), "-m", str(target_gguf), "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "-t", str(threads), "-tb", str(threads), "-c", "4096", "-np", "1"]
        cmd += ["--no-webui", "-lv", "4", *args]
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT)
        self._wait_ready()
        self.run([1, 2, 3, 4], 8)  # warm up (graph allocation, first-touch pages) outside the timings

    def _wait_ready(self, timeout: float = 120.0) -> None:
        state = wait_healthy(self.proc, self.port, timeout)
        if state == "exited":
            tail = self.log.read_text(errors="replace").strip().splitlines()[-3:]
            raise DraftsmithError(f"llama-server for {self.name} exited: {' | '.join(tail)}")
        if state == "timeout":
            self.close()
            raise DraftsmithError(f"llama-server for {self.name} did not start within {timeout:.0f} s")

    def _draft_totals(self, wait: float = 2.0) -> tuple[int, float] | None:
        """Cumulative (draft calls, drafting ms) of the newest statistics line (printed as a request
        ends; polled briefly, since the response may arrive first)."""
        t0 = time.monotonic()
        while True:
            text = self.log.read_text(errors="replace")
            found = STATS.findall(text[self.offset :])
            if found:
                self.offset = len(text)
                _, _, calls, _, _, ms = found[-1]
                return int(calls), float(ms)
            if time.monotonic() - t0 > wait:
                return None
            time.sleep(0.02)

    def run(self, ids: list[int], max_new_tokens: int) -> tuple[list[int], float, GenerationStats | None]:
        out = completion(self.port, ids, max_new_tokens)
        t = out.get("timings", {})
        seconds = (t.get("prompt_ms", 0.0) + t.get("predicted_ms", 0.0)) / 1000
        tokens = [int(x) for x in out.get("tokens", [])]
        while tokens and tokens[-1] in self.eos:
            tokens.pop()
        drafted, accepted = int(t.get("draft_n", 0)), int(t.get("draft_n_accepted", 0))
        if self.name == "llamacpp-plain":
            return tokens, seconds, None
        n = int(t.get("predicted_n", len(tokens)))
        stats = GenerationStats(new_tokens=n, rounds=max(n - accepted, 1), drafted=drafted)
        stats.accepted, stats.produced = accepted, n
        stats.prefill_s, stats.total_s = t.get("prompt_ms", 0.0) / 1000, seconds
        totals = self._draft_totals()
        if totals is not None:
            prev = self.last or (0, 0.0)
            stats.draft_s = max(totals[1] - prev[1], 0.0) / 1000
            self.last = totals
        stats.verify_s = max(t.get("predicted_ms", 0.0) / 1000 - stats.draft_s, 0.0)
        return tokens, seconds, stats

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def ngram_args(draft_max: int = DRAFT_MAX) -> list[str]:
    """llama.cpp's n-gram drafting shaped like ours: look up the last 3 tokens, draft up to draft_max
    (ngram-simple ignores --spec-draft-n-max; its own defaults are a 12-token lookup, 48 drafts)."""
    return [
        "--spec-type",
        "ngram-simple",
        "--spec-ngram-simple-size-n",
        "3",
        "--spec-ngram-simple-size-m",
        str(draft_max),
    ]


def peer_args(name: str, target, drafters: dict, draft_max: int = DRAFT_MAX) -> list[str]:
    """llama-server flags for a peer (drafters: method -> our drafter directory, or absent)."""
    from draftsmith.export.gguf import spec_type

    if name == "llamacpp-plain":
        return []
    if name == "llamacpp-ngram":
        return ngram_args(draft_max)
    method = name.removeprefix(PREFIX)
    src = drafter_source(method, drafters.get(method), target)  # its layout picks the spec type
    path, kind = drafter_gguf(method, src, target), spec_type(method, src)
    args = ["-md", str(path), "--spec-type", kind, "--spec-draft-n-max", str(draft_max)]
    if method in ("dflash", "dspark"):
        args += ["--spec-draft-p-min", "0"]  # fixed draft length, as our 4-row mode drafts
    return args


def start_peers(names: list[str], target, drafters: dict, threads: int, log_dir: Path) -> dict:
    """One running llama-server per peer (the caller closes them)."""
    from draftsmith.export.gguf import target_gguf, write_target

    model = target_gguf(target) or write_target(target, data_dir() / "gguf")
    log_dir.mkdir(parents=True, exist_ok=True)
    peers: dict[str, LlamaServerPeer] = {}
    try:
        for name in names:
            peers[name] = LlamaServerPeer(
                name,
                peer_args(name, target, drafters),
                model,
                threads,
                log_dir / f"{name}.log",
                target.eos_ids,
            )
    except BaseException:
        for p in peers.values():
            p.close()
        raise
    return peers
