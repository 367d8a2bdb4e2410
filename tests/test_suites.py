"""Tests for prompt suites: built-in counts, determinism, AlpacaEval cache handling, user JSONL errors."""

import json

import pytest

from draftsmith.errors import DraftsmithError
from draftsmith.evaluation import suites
from draftsmith.evaluation.suites import SUITES, Prompt, gsm_eval_templates, load_jsonl, load_suite


def test_registry_names():
    assert set(SUITES) == {"humaneval", "mtbench", "gsm", "alpaca"}


def test_humaneval_count_and_format():
    prompts = load_suite("humaneval")
    assert len(prompts) == 164
    assert prompts[0].id == "HumanEval/0"
    assert prompts[0].suite == "humaneval" and prompts[0].chat is True
    assert prompts[0].text.startswith("Complete the following Python function:\n\n```python\n")
    assert prompts[0].text.endswith("```") and "def has_close_elements" in prompts[0].text
    assert len({p.id for p in prompts}) == 164


def test_mtbench_count_and_first_turn():
    prompts = load_suite("mtbench")
    assert len(prompts) == 80
    assert prompts[0].id == "81"
    assert prompts[0].text.startswith("Compose an engaging travel blog post about a recent trip to Hawaii")
    assert len({p.id for p in prompts}) == 80
    assert all(p.text.strip() for p in prompts)


def test_limit_takes_prefix():
    assert [p.id for p in load_suite("humaneval", limit=3)] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert load_suite("mtbench", limit=2) == load_suite("mtbench")[:2]


def test_gsm_limit_deterministic_and_prefix_stable():
    a = load_suite("gsm", limit=5)
    b = load_suite("gsm", limit=5)
    assert len(a) == 5
    assert a == b
    assert [p.id for p in a] == [f"gsm-{i}" for i in range(5)]
    assert len({p.text for p in a}) == 5 and all(p.text.strip() for p in a)
    assert load_suite("gsm", limit=8)[:5] == a  # item i does not depend on the requested size


def test_gsm_templates():
    prompts = load_suite("gsm", limit=20)
    templates = gsm_eval_templates(20)
    assert templates == {p.meta["template"] for p in prompts}
    assert all(isinstance(t, int) and 0 <= t < 100 for t in templates)
    assert gsm_eval_templates(5) <= templates


@pytest.mark.parametrize("limit", [0, -3])
def test_nonpositive_limit_rejected(limit):
    with pytest.raises(DraftsmithError, match="limit"):
        load_suite("humaneval", limit=limit)


def test_unknown_suite_lists_valid_names():
    with pytest.raises(DraftsmithError) as exc:
        load_suite("gsm8k")
    msg = str(exc.value)
    for name in SUITES:
        assert name in msg


def test_alpaca_reads_cache(tmp_path, monkeypatch):
    rows = [{"instruction": f"Say {i}.", "dataset": "koala", "output": "x"} for i in range(4)]
    (tmp_path / "alpaca_eval_outputs.json").write_text(json.dumps(rows))
    monkeypatch.setattr(suites, "DATA_DIR", tmp_path)
    prompts = load_suite("alpaca")
    assert [p.text for p in prompts] == [f"Say {i}." for i in range(4)]
    assert [p.id for p in prompts] == [f"alpaca-{i}" for i in range(4)]
    assert load_suite("alpaca", limit=2) == prompts[:2]


def test_alpaca_missing_file_says_fetch(tmp_path, monkeypatch):
    monkeypatch.setattr(suites, "DATA_DIR", tmp_path / "nothing-here")
    with pytest.raises(DraftsmithError, match="draftsmith suites fetch"):
        load_suite("alpaca")


def test_alpaca_malformed_cache(tmp_path, monkeypatch):
    (tmp_path / "alpaca_eval_outputs.json").write_text(json.dumps({"not": "a list"}))
    monkeypatch.setattr(suites, "DATA_DIR", tmp_path)
    with pytest.raises(DraftsmithError, match="draftsmith suites fetch"):
        load_suite("alpaca")


def _write(tmp_path, lines, name="mine.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_jsonl_happy_path(tmp_path):
    path = _write(
        tmp_path,
        [
            json.dumps({"prompt": "Hello", "id": "a"}),
            "",
            json.dumps({"text": "Second"}),
            json.dumps({"instruction": "Third", "chat": False}),
            json.dumps({"question": "Fourth", "id": 7}),
        ],
    )
    prompts = load_suite(str(path))
    assert prompts == [
        Prompt(suite="mine", id="a", text="Hello"),
        Prompt(suite="mine", id="mine-1", text="Second"),
        Prompt(suite="mine", id="mine-2", text="Third", chat=False),
        Prompt(suite="mine", id="7", text="Fourth"),
    ]
    assert load_suite(str(path), limit=2) == prompts[:2]


def test_jsonl_missing_file(tmp_path):
    with pytest.raises(DraftsmithError, match="not found"):
        load_suite(str(tmp_path / "absent.jsonl"))


def test_jsonl_invalid_json_reports_line(tmp_path):
    path = _write(tmp_path, [json.dumps({"prompt": "ok"}), "{not json"])
    with pytest.raises(DraftsmithError, match=r"mine\.jsonl:2: invalid JSON"):
        load_jsonl(path)


def test_jsonl_line_without_prompt(tmp_path):
    path = _write(tmp_path, [json.dumps({"prompt": "ok"}), json.dumps({"id": "x", "answer": "4"})])
    with pytest.raises(DraftsmithError, match=r":2: no prompt field"):
        load_jsonl(path)


BAD_LINES = ['["a list"]', '{"prompt": ""}', '{"prompt": 3}', '{"prompt": "x", "chat": "no"}']


@pytest.mark.parametrize("line", BAD_LINES)
def test_jsonl_bad_values(tmp_path, line):
    with pytest.raises(DraftsmithError, match=r":1: "):
        load_jsonl(_write(tmp_path, [line]))


def test_jsonl_duplicate_id(tmp_path):
    path = _write(tmp_path, [json.dumps({"prompt": "a", "id": "x"}), json.dumps({"prompt": "b", "id": "x"})])
    with pytest.raises(DraftsmithError, match="duplicate id"):
        load_jsonl(path)


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_jsonl_empty_file(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_text(content)
    with pytest.raises(DraftsmithError, match="empty"):
        load_jsonl(path)


def test_dev_prompts_follow_the_bench_items(tmp_path):
    """Dev prompts are the items after the bench's first `skip`, never one the bench decodes."""
    from draftsmith.evaluation.dev_set import write_dev_prompts
    from draftsmith.training.regenerate import _prompts

    counts = write_dev_prompts(["humaneval", "gsm"], 10, 5, tmp_path)
    assert counts == {"humaneval": 5, "gsm": 5}
    for suite in ("humaneval", "gsm"):
        bench_ids = {p.id for p in load_suite(suite, 10)}
        rows = _prompts(tmp_path / f"{suite}.jsonl")  # what `data regenerate --prompts` reads
        assert [r["id"] for r in rows] == [p.id for p in load_suite(suite, 15)[10:]]
        assert not bench_ids & {r["id"] for r in rows}
        assert {r["category"] for r in rows} == {suite}
    # gsm's dev items come from the templates the training prompts hold out (those of the first 50)
    gsm_dev = load_suite("gsm", 15)[10:]
    assert {p.meta["template"] for p in gsm_dev} <= gsm_eval_templates(50)


def test_dev_prompts_bad_input(tmp_path):
    from draftsmith.evaluation.dev_set import write_dev_prompts

    with pytest.raises(DraftsmithError, match="no items past the first 80"):
        write_dev_prompts(["humaneval", "mtbench"], 80, 5, tmp_path / "a")
    assert not (tmp_path / "a").exists()  # nothing half-written
    with pytest.raises(DraftsmithError, match="--n >= 1"):
        write_dev_prompts(["mtbench"], 10, 0, tmp_path / "b")
    short = tmp_path / "mine.jsonl"
    short.write_text("".join(json.dumps({"id": i, "prompt": f"q{i}"}) + "\n" for i in range(12)))
    assert write_dev_prompts([str(short)], 10, 5, tmp_path / "c") == {"mine": 2}
