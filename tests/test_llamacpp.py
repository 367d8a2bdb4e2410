"""llama.cpp as a deployment target and bench peer: the pinned build, GGUF export, llama-server.

The unit tests run anywhere; the end-to-end ones need the pinned llama.cpp that ./setup.sh builds
(`draftsmith llamacpp install`) and are skipped without it.
"""

from __future__ import annotations

import json

import pytest
import torch

from draftsmith.deploy import llamacpp
from draftsmith.errors import DraftsmithError
from draftsmith.evaluation.llamacpp_peers import STATS, baseline_of


def test_cpu_flags_name_what_the_cpu_has_and_never_amx():
    avx512 = (
        "flags\t\t: fpu sse4_2 avx avx2 fma f16c bmi2 avx512f avx512_vnni avx512_bf16 amx_tile amx_int8\n"
    )
    flags = llamacpp.cpu_flags(avx512)
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AVX512=ON" in flags and "-DGGML_AVX512_BF16=ON" in flags
    assert "-DGGML_AMX_INT8=OFF" in flags and "-DGGML_AMX_TILE=OFF" in flags  # SIGILL for batches > 1
    avx2 = llamacpp.cpu_flags("flags : fpu sse4_2 avx avx2 fma f16c\n")
    assert "-DGGML_AVX2=ON" in avx2 and "-DGGML_AVX512=OFF" in avx2 and "-DGGML_AVX512_VNNI=OFF" in avx2
    assert llamacpp.cpu_flags("processor : 0\nFeatures : fp asimd\n") == ["-DGGML_NATIVE=ON"]


def test_a_missing_install_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    from draftsmith.cli import main

    monkeypatch.setenv("DRAFTSMITH_LLAMA_CPP", str(tmp_path / "none"))
    with pytest.raises(DraftsmithError, match="draftsmith llamacpp install"):
        llamacpp.binary("llama-server")
    assert main(["llamacpp", "path"]) == 2
    assert "not installed" in capsys.readouterr().err
    with pytest.raises(DraftsmithError, match="sha256"):
        (tmp_path / "a.tar.gz").write_bytes(b"not the archive")
        llamacpp.install(archive=tmp_path / "a.tar.gz")


def test_the_speculative_statistics_line_parses():
    line = (
        "0.34.526.761 I spec common_specu: statistics     draft-dspark: "
        "#calls(b,g,a) =    1     41     41, "
        "#gen drafts =     41, #acc drafts =    12, #gen tokens =    123, #acc tokens =    21, "
        "#mean acc len = 1.51, #acc rate/pos = (0.293, 0.171, 0.049), dur(b,g,a) = 0.002, 3796.651, 0.035 ms"
    )
    kind, _, calls, _, _, ms = STATS.findall(line)[0]
    assert (kind, int(calls), float(ms)) == ("draft-dspark", 41, 3796.651)
    assert baseline_of("llamacpp-dspark") == "llamacpp-plain" and baseline_of("dspark") is None
    assert baseline_of("llamacpp-plain") is None


needs_llamacpp = pytest.mark.skipif(not llamacpp.installed(), reason="llama.cpp not built (./setup.sh)")
PROMPTS = [
    "Write a Python function that returns the n-th Fibonacci number.",
    "What is 12 times 7? Explain step by step.",
    'def is_prime(n):\n    """Return True if n is prime."""',
]


@pytest.fixture(scope="module")
def real_target():
    from draftsmith.api import load_target

    return load_target(None)


@needs_llamacpp
@pytest.mark.slow
@pytest.mark.parametrize("method", ["dspark", "dflash"])
def test_the_shipped_drafter_exports_to_gguf_and_drafts_in_llama_server_as_ours(
    tmp_path, real_target, method
):
    """`export --format gguf` of the shipped drafter (`--no-lookup` where it reads lookup guesses):
    llama-server loads it and its first drafts are ours with `--no-lookup`. llama.cpp's Q4 kernels
    give the drafter slightly different target states than our dequantised weights, and at 3 drafts
    it feeds the drafter a shorter block than ours does, so a flat draft distribution may pick
    otherwise: the first drafted token must agree in 2 of the 3 blocks, and every token that differs
    must be one our drafter was unsure of (p < 0.5); for DSpark, whose Markov head chains each slot
    on the previous pick, the first difference of each block; for DFlash, whose slots do not chain,
    every difference. (On fp32 weights, asked for the whole block, the engines agree token for token:
    test_engines_agree.py.)"""
    from draftsmith.drafters.checkpoint import shipped_drafter
    from draftsmith.drafters.registry import METHODS
    from draftsmith.evaluation import first_drafts
    from draftsmith.evaluation.llamacpp_peers import engine_variant
    from draftsmith.export.gguf import target_gguf
    from draftsmith.export.methods import export_directory

    with torch.no_grad():
        src = shipped_drafter(method, real_target)
        lookup, cut = engine_variant(method, src)  # `export --no-lookup` where it reads lookup guesses
        same = METHODS[method].options(lookup=lookup, draft_vocab=cut or 0)  # what that drafts here
        gguf, _ = export_directory(
            src, "gguf", tmp_path / "d", real_target, None, lookup=lookup, draft_vocab=cut
        )
        k = 3  # as the bench runs llama.cpp (its block is shorter than the drafter's: see EXPORT.md)
        prompts = [real_target.encode(p) for p in PROMPTS]
        ours = [first_drafts.ours(real_target, method, ids, k, options=same) for ids in prompts]
    theirs = first_drafts.in_llamacpp(
        target_gguf(real_target), gguf, method, prompts, tmp_path / "server.log", src, k
    )
    assert all(len(t.drafts) == k for t in theirs), theirs
    for o, t in zip(ours, theirs, strict=True):
        assert o.token == t.token and len(o.probs) == len(o.drafts)  # a probability for each draft
        differ = [j for j, (a, b) in enumerate(zip(o.drafts, t.drafts, strict=False)) if a != b]
        # DSpark's Markov head chains each slot on the previous pick: after a first difference the two
        # engines draft from different prefixes, so only that first difference is theirs to explain
        checked = differ[:1] if method == "dspark" else differ
        assert all(o.probs[j] < 0.5 for j in checked), (ours, theirs)
    first = sum(o.drafts[0] == t.drafts[0] for o, t in zip(ours, theirs, strict=True))
    assert first >= 2, (ours, theirs)


@needs_llamacpp
@pytest.mark.slow
def test_bench_runs_llama_cpp_peers_beside_our_engine(tmp_path, real_target):
    """One interleaved bench with llama.cpp plain and DSpark: tokens, accepted length from its
    counters, drafting time from its statistics, exact against llama.cpp's own plain decoding."""
    from draftsmith.evaluation.bench import markdown_table, run_bench
    from draftsmith.evaluation.suites import Prompt

    prompts = {"mix": [Prompt(id=f"p{i}", text=t, suite="mix") for i, t in enumerate(PROMPTS[:2])]}
    methods = ["plain", "llamacpp-plain", "llamacpp-dspark"]
    res = run_bench(
        real_target,
        prompts,
        methods,
        repeats=1,
        max_new_tokens=24,
        progress=False,
        peer_logs=str(tmp_path / "logs"),
    )
    by = {s.method: s for s in res.summaries if s.suite == "mix"}
    peer = by["llamacpp-dspark"]
    assert peer.identical == 2 and peer.baseline == "llamacpp-plain" and peer.tau and peer.tau > 1.0
    assert peer.draft_ms and peer.draft_ms > 0 and peer.verify_ms and peer.verify_ms > 0
    assert by["llamacpp-plain"].same_as_plain is not None and by["plain"].same_as_plain is None
    assert all(r.tokens for r in res.records)
    assert "llamacpp-dspark" in markdown_table(res.summaries)
    assert (tmp_path / "logs" / "llamacpp-dspark.log").is_file()


def test_the_llamacpp_round_model_predicts_from_the_verify_curve(tmp_path):
    """speedup = (prefill + n T(1)) / (prefill + n / tau (V(1 + d) + drafting)), T interpolated,
    V(k) = T(k) + (k - 1) r: the server's verify step computes and samples every row."""
    from dataclasses import replace

    from draftsmith.planning.llamacpp import VerifyCurve, break_even, compare, compare_plain, predict

    curve = VerifyCurve((1, 2, 4, 8), (0.010, 0.013, 0.018, 0.030), "test")
    assert curve.step_s(3) == pytest.approx(0.0155) and curve.step_s(16) == pytest.approx(0.060)
    assert curve.relative()[4] == 1.8
    assert predict(curve, 2.0, 2.0, 0.002, 100, 0.0) == pytest.approx(0.010 * 2 / (0.0155 + 0.002))
    assert break_even(curve, 0.0) == pytest.approx(1.8)  # 3 drafts: a 4-token step
    stats = {"rounds": 50, "drafted": 150, "draft_s": 0.1, "new_tokens": 100, "prefill_s": 0.05}
    bench = {
        "summaries": [
            {"suite": "code", "method": "llamacpp-dspark", "tau": 2.0, "rounds": 50, "speedup_median": 1.1},
            {"suite": "code", "method": "llamacpp-plain", "tau": None, "rounds": None},
            {"suite": "code", "method": "dspark", "tau": 2.2, "rounds": 40},
        ],
        "records": [{"method": "llamacpp-dspark", "suite": "code", "stats": stats}],
    }
    (tmp_path / "b.json").write_text(json.dumps(bench))
    (row,) = compare(curve, tmp_path / "b.json")
    assert (row.method, row.drafts, row.draft_ms, row.measured) == ("llamacpp-dspark", 3.0, 2.0, 1.1)
    assert row.predicted == pytest.approx(predict(curve, 2.0, 3.0, 0.002, 100, 0.05), abs=1e-3)
    assert compare_plain(curve, tmp_path / "b.json") == []  # no llamacpp-plain records to compare
    bench["records"].append({"method": "llamacpp-plain", "suite": "code", "tokens": list(range(100))})
    bench["summaries"][1]["tok_s_median"] = 80.0
    (tmp_path / "b.json").write_text(json.dumps(bench))
    (plain,) = compare_plain(curve, tmp_path / "b.json")
    assert (plain.tokens, plain.prefill_ms, plain.measured) == (100, 50.0, 80.0)
    assert plain.predicted == pytest.approx(100 / (0.05 + 100 * 0.010), abs=0.1)
    rows = replace(curve, row_s=0.001)  # each verified row beyond the first adds 1 ms
    assert rows.verify_s(1) == curve.step_s(1) and rows.verify_s(4) == pytest.approx(0.018 + 0.003)
    assert predict(rows, 2.0, 2.0, 0.002, 100, 0.0) == pytest.approx(0.010 * 2 / (0.0155 + 0.002 + 0.002))
    assert break_even(rows, 0.0) == pytest.approx(2.1)


@needs_llamacpp
def test_the_servers_per_row_verify_cost_is_measured_with_its_own_ngram_drafting():
    """No trained drafter needed: llama-server's n-gram drafting on a repeating prompt verifies
    several rows a round; what those rounds cost beyond llama-bench's step is the per-row cost."""
    from draftsmith.models.loading import default_target_file
    from draftsmith.planning.llamacpp import VerifyCurve, measure_row_cost

    flat = VerifyCurve((1, 2, 4, 8), (0.001, 0.001, 0.001, 0.001), "a 1 ms step whatever its rows")
    measured = measure_row_cost(default_target_file(), flat, threads=2)
    assert 0 < measured.row_s < 0.1 and "a verified row" in measured.source


def test_plan_engine_llamacpp_errors_are_one_line(tmp_path, capsys):
    from draftsmith.cli import main

    assert main(["plan", "--engine", "llamacpp"]) == 2
    assert "no hardware given" in capsys.readouterr().err  # a plan for llama.cpp needs a machine
    assert main(["plan", "--engine", "llamacpp", "--measure", "--bench", str(tmp_path / "no.json")]) == 2
    assert "bench result not found" in capsys.readouterr().err
    (tmp_path / "m.safetensors").write_bytes(b"x")
    model = str(tmp_path / "m.safetensors")
    assert main(["plan", "--engine", "llamacpp", "--measure", "--model", model]) == 2
    assert "measures a GGUF file" in capsys.readouterr().err
