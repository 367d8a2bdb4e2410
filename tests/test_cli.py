"""The command line: real runs on the default target, and one clear line for every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from draftsmith.cli import main
from draftsmith.errors import DraftsmithError

SHIPPED_DSPARK = str(Path(__file__).resolve().parents[1] / "draftsmith/drafters/pretrained/smollm2-dspark")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["generate", "  "], "prompt is empty"),
        (["generate", "hi", "--method", "warp"], "unknown method"),
        (["generate", "hi", "--temperature", "-0.5"], "temperature"),
        (["generate", "hi", "--top-p", "1.5"], "top_p"),
        (["generate", "hi", "--top-k", "-2"], "top_k"),
        (["generate", "hi", "--target", "/no/such/model"], "not found"),
        (["generate", "hi", "--target", "missing.gguf"], "not found"),
        (["bench", "--methods", "plain,warp"], "unknown method"),
        (["bench", "--suite", "nosuchsuite"], "unknown suite"),
        (["bench", "--suite", "humaneval", "--limit", "0"], "limit"),
        (["bench", "--suite", "/tmp/none.jsonl"], "not found"),
        (["bench", "--methods", "dspark", "--drafter", "eagle=/tmp/x"], "unknown method 'eagle'"),
        (["bench", "--methods", "hybrid", "--lookup-bonus", "eagle=1"], "unknown method or variant 'eagle'"),
        (["bench", "--methods", "hybrid", "--lookup-bonus", "hybrid=lots"], "not a number"),
        (["generate", "hi", "--method", "hybrid", "--lookup-bonus", "-1"], "finite number >= 0"),
        (["bench", "--methods", "hybrid", "--lookup-bonus", "hybrid=inf"], "finite number >= 0"),
        (["bench", "--methods", "dspark", "--length-rule", "dspark=fast"], "'fast' is not one of prob"),
        (["generate", "hi", "--method", "dspark", "--length-rule", "eagle=prob"], "unknown method"),
        (["generate", "hi", "--method", "dflash", "--drafter", "/no/such/drafter"], "not found"),
        (["train", "--cache", "/tmp/c", "--out", "/tmp/o", "--init-from", "/no/such/drafter"], "not found"),
        (
            ["grow-vocab", "--drafter", "/tmp/d", "--out", "/tmp/d", "--size", "9", "--answers", "a"],
            "must differ",
        ),
        (
            ["grow-vocab", "--drafter", "/no/such/d", "--out", "/tmp/o", "--size", "9", "--answers", "a"],
            "not found",
        ),
        (
            ["grow-vocab", "--drafter", SHIPPED_DSPARK, "--out", "/tmp/o", "--size", "9", "--answers", "/x"],
            "file not found",
        ),
    ],
)
def test_bad_inputs_print_one_clear_error(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("error: ") and message in err.lower()
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "bad",
    [["--max-new-tokens", "many"], ["--fixed-rows", "1"], ["--fixed-rows", "17"], ["--fixed-rows", "wide"]],
)
def test_bad_number_is_an_argparse_error(capsys, bad):
    with pytest.raises(SystemExit) as e:
        main(["generate", "hi", *bad])
    assert e.value.code == 2


def test_generate_prints_answer_and_stats(capsys):
    code, out, err = run(capsys, "generate", "What is 2+2?", "--max-new-tokens", "12", "--method", "ngram")
    assert code == 0 and out.strip()
    assert "[ngram]" in err and "tok/s" in err and "finish:" in err


def test_bench_writes_json_with_losslessness(capsys, tmp_path):
    suite = tmp_path / "mini.jsonl"
    suite.write_text(json.dumps({"prompt": "List the numbers from one to ten in words."}) + "\n")
    out_file = tmp_path / "r.json"
    code, out, _ = run(
        capsys,
        "bench",
        "--methods",
        "ngram,hf-plain",
        "--suite",
        str(suite),
        "--limit",
        "1",
        "--repeats",
        "2",
        "--max-new-tokens",
        "16",
        "--out",
        str(out_file),
    )
    assert code == 0 and "| mini | ngram |" in out
    data = json.loads(out_file.read_text())
    rows = {s["method"]: s for s in data["summaries"]}
    assert set(rows) == {"plain", "ngram", "hf-plain"}
    assert rows["ngram"]["identical"] == 1 and rows["hf-plain"]["identical"] == 1
    assert rows["ngram"]["speedup_median"] > 0 and len(data["records"]) == 6
    assert data["config"]["repeats_done"] == 2


def test_a_stopped_bench_keeps_its_complete_repeats():
    """After each repeat but the last, the results so far are saved: stopping a long bench during
    repeat 2 keeps repeat 1, summarised over its complete repeats only."""
    from conftest import tiny_target

    from draftsmith.evaluation.bench import run_bench
    from draftsmith.evaluation.suites import Prompt

    target = tiny_target()
    prompts = {"mini": [Prompt("mini", f"p{i}", f"t{5 + i} t9 t14 t3", chat=False) for i in range(2)]}
    saved = []
    result = run_bench(
        target, prompts, ["ngram"], repeats=3, max_new_tokens=8, progress=False, checkpoint=saved.append
    )
    assert [p.config["repeats_done"] for p in saved] == [1, 2] and result.config["repeats_done"] == 3
    first = saved[0]
    assert len(first.records) == 4 and {r.repeat for r in first.records} == {0}
    ngram = next(s for s in first.summaries if s.method == "ngram")
    assert ngram.prompts == 2 and ngram.identical == 2 and ngram.speedup_median > 0
    assert len(result.records) == 12


def test_training_commands_end_to_end(capsys, tmp_path):
    """prompts -> (answers) -> cache -> train -> generate with the trained drafter, on the real target."""
    code, out, _ = run(capsys, "data", "prompts", "--n", "40", "--out", str(tmp_path / "prompts"))
    assert code == 0 and (tmp_path / "prompts" / "train.jsonl").is_file()
    answers = tmp_path / "answers.jsonl"  # regeneration is covered on tiny models; keep this fast
    answers.write_text(
        json.dumps({"id": "a", "prompt": "What is 3+4?", "answer": "3 + 4 = 7. The answer is 7."})
        + "\n"
        + json.dumps({"id": "b", "prompt": "Name a color.", "answer": "Blue is a color of the sky."})
        + "\n"
    )
    code, _, err = run(capsys, "data", "cache", "--answers", str(answers), "--out", str(tmp_path / "cache"))
    assert code == 0 and "GiB" in err
    code, out, _ = run(
        capsys,
        "train",
        "--method",
        "dspark",
        "--cache",
        str(tmp_path / "cache"),
        "--out",
        str(tmp_path / "d"),
        "--steps",
        "2",
        "--batch",
        "1",
        "--anchors",
        "4",
        "--draft-vocab",
        "512",
        "--eval-every",
        "1",
    )
    assert code == 0 and json.loads(out)["steps"] == 2
    code, out, err = run(
        capsys,
        "generate",
        "What is 3+4?",
        "--method",
        "dspark",
        "--drafter",
        str(tmp_path / "d"),
        "--max-new-tokens",
        "8",
    )
    assert code == 0 and "[dspark]" in err
    code, _, err = run(capsys, "generate", "hi", "--method", "dflash", "--drafter", str(tmp_path / "d"))
    assert code == 2 and "dspark" in err


def test_drafter_paths_per_method():
    from draftsmith.cli.common import drafter_paths

    here = str(Path(__file__).parent)
    assert drafter_paths([f"dflash={here}", f"dspark={here}"]) == {"dflash": here, "dspark": here}
    assert drafter_paths([f"dspark:new={here}"]) == {"dspark:new": here}
    assert drafter_paths([here]) == {"*": here}
    assert drafter_paths(None) == {}


def drafter_values(*flags):
    from draftsmith.cli import build_parser
    from draftsmith.cli.common import drafter_values

    return drafter_values(build_parser().parse_args(["bench", *flags]))


def test_lookup_bonus_per_method_and_variant():
    """--lookup-bonus VALUE sets every hybrid, METHOD=VALUE one method or bench variant."""
    from draftsmith.drafters.hybrid import LOOKUP_BONUS
    from draftsmith.drafters.registry import method_options

    values = drafter_values("--lookup-bonus", "2", "--lookup-bonus", "hybrid:hard=0")
    assert values["lookup_bonus"] == {"*": 2.0, "hybrid:hard": 0.0}
    values["drafter"] = {"hybrid:hard": str(Path(__file__).parent)}  # a variant has its own drafter
    assert method_options("hybrid:hard", values).lookup_bonus == 0.0
    assert method_options("hybrid", values).lookup_bonus == 2.0
    assert method_options("hybrid", {}).lookup_bonus == LOOKUP_BONUS  # the method's own default


def test_length_rule_per_method_and_variant():
    from draftsmith.drafters.registry import method_options

    values = drafter_values("--length-rule", "prob", "--length-rule", "dspark:hist=history")
    values["drafter"] = {"dspark:hist": str(Path(__file__).parent)}
    assert method_options("dspark:hist", values).length_rule == "history"
    assert method_options("dflash", values).length_rule == "prob"


def test_drafter_flags_come_from_each_methods_options():
    """Unset flags leave each method its own default (the hybrid's lookup matches 3 tokens, prompt
    lookup 2 and up); a flag given applies to every method that has the option, not to the others."""
    from draftsmith.drafters.registry import build_drafter, method_options

    assert method_options("ngram", drafter_values()).ngram_min == 2
    assert method_options("hybrid", drafter_values()).ngram_min == 3
    values = drafter_values("--ngram-max", "5", "--confidence-threshold", "0.5")
    assert method_options("ngram", values).ngram_max == method_options("hybrid", values).ngram_max == 5
    assert method_options("dspark", values).confidence_threshold == 0.5
    assert method_options("plain", values) is None
    with pytest.raises(DraftsmithError, match="ngram_min <= ngram_max"):
        method_options("ngram", drafter_values("--ngram-min", "4"))
    with pytest.raises(DraftsmithError, match="no method takes option"):
        method_options("ngram", {"ngram_mx": 4})
    with pytest.raises(TypeError, match="takes NgramDecodeOptions"):
        build_drafter("ngram", None, method_options("dspark", {}))


def test_score_gives_teacher_forced_tau_of_the_shipped_drafter(capsys, tmp_path):
    answers = tmp_path / "answers.jsonl"
    rows = [
        {"id": "a", "prompt": "What is 12 + 30?", "answer": "12 + 30 = 42. The answer is 42."},
        {"id": "b", "prompt": "Name three colours.", "answer": "Red, green and blue are three colours."},
    ]
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = run(capsys, "score", "--method", "dspark", "--answers", str(answers), "--anchors", "8")
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["sequences"] == 2
    assert 1.0 <= result["tau_k3"] <= min(4.0, result["tau"])
    code, _, err = run(capsys, "score", "--answers", str(tmp_path / "none.jsonl"))
    assert code == 2 and "not found" in err
    code, _, err = run(capsys, "score", "--method", "ngram", "--answers", str(answers))
    assert code == 2 and "not trained" in err
    # a bf16 target: the drafter still scores in fp32 with fp32 copies of the target's tensors
    code, out, err = run(
        capsys,
        "score",
        "--method",
        "dflash",
        "--answers",
        str(answers),
        "--anchors",
        "8",
        "--dtype",
        "bfloat16",
    )
    assert code == 0, err
    assert json.loads(out.strip().splitlines()[-1])["tau"] >= 1.0


def test_bench_compares_two_drafters_of_one_method(capsys, tmp_path):
    """A variant METHOD:LABEL runs METHOD with its own --drafter, interleaved with the rest."""
    shipped = str(Path(__file__).parents[1] / "draftsmith" / "drafters" / "pretrained" / "smollm2-dspark")
    out = tmp_path / "bench.json"
    args = ["bench", "--methods", "plain,dspark,dspark:again", "--suite", "gsm", "--limit", "1"]
    args += ["--repeats", "1", "--max-new-tokens", "8", "--out", str(out)]
    code, _, err = run(capsys, *args)
    assert code == 2 and "dspark:again=DIR" in err  # a variant without its own drafter
    code, stdout, _ = run(capsys, *args, "--drafter", f"dspark:again={shipped}")
    assert code == 0 and "dspark:again" in stdout
    rows = {r["method"]: r for r in json.loads(out.read_text())["summaries"] if r["suite"] == "gsm"}
    assert rows["dspark"]["identical"] == rows["dspark:again"]["identical"] == 1
    assert rows["dspark"]["tau"] == rows["dspark:again"]["tau"]  # the same drafter, greedy
    code, _, err = run(capsys, "bench", "--methods", "plain,dspark:", "--suite", "gsm")
    assert code == 2 and "unknown method" in err
