"""`draftsmith build` on a tiny target: one command from prompts to report, killed in every stage and
rerun to the same files as a straight run, a finished build reused whole, bad inputs refused in one
line, and `plan --drafter` pricing what the build measured."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import VOCAB, tiny_model, word_tokenizer

STAGES = ("prompts", "answers", "cache", "train", "sts", "score", "bench", "export", "report")
ARGS = [
    "--steps",
    "6",
    "--max-new-tokens",
    "24",
    "--bench-prompts",
    "2",
    "--bench-tokens",
    "16",
    "--top-up",
    "0",
]
CLI = [sys.executable, "-m", "draftsmith.cli"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A tiny Llama target saved as an HF directory, and 24 prompts of its words in two categories."""
    d = tmp_path_factory.mktemp("target")
    tiny_model("llama", layers=4).save_pretrained(d)
    word_tokenizer().save_pretrained(d)
    g = torch.Generator().manual_seed(0)
    rows = [
        {
            "id": f"p{i}",
            "prompt": " ".join(f"t{t}" for t in torch.randint(3, VOCAB, (8,), generator=g).tolist()),
            "category": "even" if i % 2 == 0 else "odd",
        }
        for i in range(24)
    ]
    (d / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def build(tiny: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [*CLI, "build", "--prompts", str(tiny / "prompts.jsonl"), "--target", str(tiny), "--out", str(out)]
    return subprocess.run([*cmd, *ARGS, *extra], capture_output=True, text=True, timeout=600)


def killed_in(tiny: Path, out: Path, stage: str, delay: float = 0.5) -> None:
    """Start the build, and kill -9 it `delay` s after `stage` starts (or when it ends first)."""
    cmd = [*CLI, "build", "--prompts", str(tiny / "prompts.jsonl"), "--target", str(tiny), "--out", str(out)]
    proc = subprocess.Popen([*cmd, *ARGS], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record = out / "build.json"
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            status = json.loads(record.read_text())["stages"].get(stage, {}).get("status")
        except (OSError, ValueError):
            status = None
        if status in ("running", "done"):
            time.sleep(delay if status == "running" else 0)
            break
        time.sleep(0.05)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def outputs(out: Path) -> dict[str, str]:
    """The files a build's result is made of (timings and logs aside)."""
    files = [
        "prompts/train.jsonl",
        "prompts/held_out.jsonl",
        "answers/train.jsonl",
        "answers/held_out.jsonl",
        "drafter/model.safetensors",
        "drafter/config.json",
        "drafter/sts.json",
        "export/vllm-speculators/model.safetensors",
        "export/sglang-deepspec/model.safetensors",
    ]
    shards = sorted((out / "cache").glob("shard-*/*.npy"))
    return {f: digest(out / f) for f in files} | {str(p.relative_to(out)): digest(p) for p in shards}


def test_build_killed_in_every_stage_ends_with_the_files_of_a_straight_run(tiny, tmp_path):
    straight = build(tiny, tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-2000:]
    for stage in STAGES:
        killed_in(tiny, tmp_path / "killed", stage)
    record = json.loads((tmp_path / "killed" / "build.json").read_text())
    assert sum(s.get("runs", 0) for s in record["stages"].values()) > len(record["stages"])  # kills landed
    resumed = build(tiny, tmp_path / "killed")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert outputs(tmp_path / "killed") == outputs(tmp_path / "straight")

    # a finished build is reused whole: every stage says so and nothing is loaded or decoded again
    again = build(tiny, tmp_path / "straight")
    assert again.returncode == 0
    assert [
        line.split(":")[1].strip() for line in again.stdout.splitlines() if "done before" in line
    ] == list(STAGES)
    report = (tmp_path / "straight" / "report.md").read_text()
    for plot in ("held_out_tau", "acceptance_by_position", "speedup_by_category", "round_time"):
        assert (
            f"plots/{plot}.png" in report and (tmp_path / "straight" / "plots" / f"{plot}.png").stat().st_size
        )
    assert "| even |" in report and "| odd |" in report  # speedup and scores per held-out category
    assert "vllm serve" in report and "sglang.launch_server" in report

    # the planner prices what the build measured, on other hardware
    plan = subprocess.run(
        [
            *CLI,
            "plan",
            "--drafter",
            str(tmp_path / "straight" / "drafter"),
            "--gpu",
            "4090",
            "--model",
            "qwen3-8b",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plan.returncode == 0, plan.stderr
    rows = json.loads(plan.stdout)["plan"]["methods"]
    assert {r["task"] for r in rows} >= {"even", "odd"} and all(r["acceptance"]["measured"] for r in rows)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--steps", "5", "--budget", "20m"], "not allowed with argument"),
        (["--budget", "soon"], "--budget: give a duration"),
        (["--method", "plain"], "--method plain: choose a trainable one"),
        (["--held-out", "/nonexistent.jsonl"], "--held-out: file not found"),
    ],
)
def test_bad_build_inputs_fail_in_one_line(tiny, tmp_path, extra, message):
    cmd = [*CLI, "build", "--prompts", str(tiny / "prompts.jsonl"), "--target", str(tiny)]
    res = subprocess.run(
        [*cmd, "--out", str(tmp_path / "b"), *extra], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr


def test_a_build_with_other_settings_is_refused(tmp_path):
    from dataclasses import asdict

    from draftsmith.build.stages import BuildSettings
    from draftsmith.build.state import BuildState
    from draftsmith.errors import DraftsmithError

    BuildState(tmp_path / "b", asdict(BuildSettings("p.jsonl", seed=1)))
    with pytest.raises(DraftsmithError, match=r"holds a build with other settings \(seed: 1 then, 2 now\)"):
        BuildState(tmp_path / "b", asdict(BuildSettings("p.jsonl", seed=2)))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "mine.txt").write_text("keep")
    with pytest.raises(DraftsmithError, match="a directory with other files"):
        BuildState(tmp_path / "c", asdict(BuildSettings("p.jsonl")))
    assert (tmp_path / "c" / "mine.txt").read_text() == "keep"
