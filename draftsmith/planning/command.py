"""The `draftsmith plan` command: its options and the glue from options to a printed plan."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from draftsmith.engine.step_shapes import fixed_rows_arg
from draftsmith.errors import DraftsmithError
from draftsmith.planning.acceptance import Acceptance, from_cumulative

MAX_PCIE_GB_PER_TOKEN = 2000.0  # more than any model's weights


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("hardware (one of: --gpu, --cpu, --bandwidth..., --measure)")
    g.add_argument(
        "--gpu",
        default=None,
        help="GPU or Apple preset, e.g. 4090, 3090, 5060ti-16g, l40s, a100-40g, h100-sxm, h100-pcie, m4-max",
    )
    g.add_argument(
        "--cpu",
        default=None,
        help="CPU memory: ddr4-3200x8, ddr5-4800x2, w3-3345, epyc-9004, epyc-7642-2s, desktop-ddr5, dev; "
        "alone: a CPU-only plan; with --gpu: the CPU/GPU offload bound",
    )
    g.add_argument(
        "--bandwidth", type=float, default=None, help="memory bandwidth, GB/s (overrides a preset)"
    )
    g.add_argument("--tflops", type=float, default=None, help="dense bf16 TFLOPS (overrides a preset)")
    g.add_argument("--vram", type=float, default=None, help="device memory, GiB (overrides a preset)")
    g.add_argument(
        "--pcie", default="gen4x16", help="PCIe link for CPU/GPU offload: gen3x16, gen4x16, gen5x8, ..."
    )
    g.add_argument(
        "--pcie-gb-per-token",
        type=float,
        default=0.5,
        help="the article's rule of thumb for PCIe traffic per token with streamed weights (0.5 GB)",
    )
    g.add_argument(
        "--measure",
        action="store_true",
        help="this machine: load the model, use its calibrated step costs "
        "(with --bench: predicted against measured tok/s)",
    )
    g.add_argument(
        "--engine",
        choices=["llamacpp", "vllm", "sglang", "draftsmith"],
        default=None,
        help="the engine you deploy with: its achievable bandwidth and verify-cost curve price the steps, "
        "and only methods it runs are listed (default: any engine; costs as llama.cpp for quantised weights, "
        "CPUs and Apple, vLLM for 16-bit weights on a GPU). With --measure: whose step costs (llamacpp: "
        "llama-bench's verify curve on the target's GGUF)",
    )
    g.add_argument("--dtype", default=None, help="--measure: dtype to load (default: the bench's, else auto)")
    g.add_argument(
        "--fixed-rows", type=fixed_rows_arg, default=None, help="--measure: auto (default), mixed, 0, 2..16"
    )
    g = p.add_argument_group("model and workload")
    g.add_argument(
        "--model",
        default=None,
        help="built-in example (smollm2-135m, qwen3-8b, qwen3-32b, qwen3-30b-a3b, ...), a directory or "
        "config.json, or a .gguf file (default: the default target's GGUF)",
    )
    g.add_argument("--bits", type=float, default=None, help="bits per weight (default: the checkpoint's)")
    g.add_argument(
        "--draft-model", default=None, help="method draft-model: the draft LM (default: ~1/10 size)"
    )
    g.add_argument("--context", type=int, default=4096, help="prompt/context tokens per sequence")
    g.add_argument("--answer-len", type=int, default=512, help="tokens generated per answer")
    g.add_argument("--concurrency", type=int, default=1, help="sequences decoded together")
    g.add_argument(
        "--kv-bits", type=float, default=16, help="bits per KV-cache value (16: f16/bf16; 8: fp8/q8_0; 4: q4)"
    )
    g = p.add_argument_group("methods and acceptance")
    g.add_argument(
        "--method",
        action="append",
        default=None,
        help="methods to plan (comma-separated or repeated; default: all)",
    )
    g.add_argument("--task", action="append", default=None, help="code, chat, math (default: all three)")
    g.add_argument(
        "--bench", default=None, help="a `draftsmith bench --out` JSON: measured acceptance per suite"
    )
    g.add_argument(
        "--tau",
        type=float,
        default=None,
        help="a drafter measured elsewhere: its accepted length a round (the bonus token included) as "
        "published, at --draft-len drafts; replaces the typical acceptance of the --method planned",
    )
    g.add_argument(
        "--draft-len", type=int, default=None, help="with --tau: the draft length it was measured at"
    )
    g.add_argument(
        "--drafter",
        default=None,
        metavar="DIR",
        help="a drafter `draftsmith build` measured: its acceptance by draft position per category "
        "(DIR/acceptance.json) is planned, instead of typical figures",
    )
    g = p.add_argument_group("what building a drafter costs on this hardware (an estimate)")
    g.add_argument(
        "--train-answers",
        type=int,
        default=None,
        metavar="N",
        help="estimate regenerating N answers, caching them and training --train-steps on --gpu/--cpu "
        "(--method: the drafter, default dspark)",
    )
    g.add_argument("--train-steps", type=int, default=20000, help="with --train-answers: training steps")
    g.add_argument(
        "--devices", type=int, default=1, help="with --train-answers: GPUs (torchrun, vLLM replicas)"
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument(
        "--published",
        action="store_true",
        help="check the planner against published measurements (docs/PLANNING.md): predicted vs published",
    )
    p.add_argument("--engines", action="store_true", help="print the engine support matrix")


def _given_tau(args: argparse.Namespace) -> tuple[float, int] | None:
    """(tau, draft length) from --tau and --draft-len, which come together."""
    if (args.tau is None) != (args.draft_len is None):
        raise DraftsmithError(
            "--tau and --draft-len come together: the accepted length and the draft length it was measured at"
        )
    return None if args.tau is None else (args.tau, args.draft_len)


ACCEPTANCE_FILE = "acceptance.json"
"""What `draftsmith build` measured of a drafter (acceptance by draft position per category), kept
with it so the planner can price it on other hardware."""


def drafter_acceptances(directory: str | Path) -> list[Acceptance]:
    """The measured curves a drafter directory carries, one per category."""
    path = Path(directory) / ACCEPTANCE_FILE
    if not path.is_file():
        raise DraftsmithError(
            f"{directory} holds no {ACCEPTANCE_FILE}: `draftsmith build` writes it from its bench "
            "(or give the accepted length you measured with --tau and --draft-len)"
        )
    try:
        data = json.loads(path.read_text())
        rows = [
            from_cumulative(
                data["method"],
                suite,
                v["acceptance_by_position"],
                v["tau"],
                f"measured: {data['measured']}",
                True,
            )
            for suite, v in data["suites"].items()
            if v.get("tau") and v.get("acceptance_by_position")
        ]
    except (ValueError, KeyError, TypeError) as e:
        raise DraftsmithError(f"{path} is not a drafter's acceptance record ({e})") from e
    if not rows:
        raise DraftsmithError(f"{path} holds no measured acceptance")
    return rows


def drafter_plan(
    directory: str | Path, gpu: str | None, cpu: str | None, model: str | None, bits: float | None
):
    """The plan of a drafter's own measured acceptance on the named hardware and model."""
    from draftsmith.planning import hardware, model_spec
    from draftsmith.planning.plan import build

    acceptances = drafter_acceptances(directory)
    hw = hardware.resolve(gpu, cpu, None, None, None)
    methods = sorted({a.method for a in acceptances})
    return build(model_spec.resolve(model, bits), hw=hw, methods=methods, acceptances=acceptances)


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def run(args: argparse.Namespace) -> int:
    from draftsmith.planning import bench_file, hardware, model_spec
    from draftsmith.planning.plan import build
    from draftsmith.planning.render import markdown

    if getattr(args, "published", False):
        return _published(args)
    if getattr(args, "engines", False):
        from draftsmith.planning.engines import ENGINES, matrix_markdown

        if args.json:
            print(json.dumps({k: e.to_json() for k, e in ENGINES.items()}, indent=1))
        else:
            print(matrix_markdown())
        return 0
    if getattr(args, "train_answers", None) is not None:
        return _training_cost(args)
    if args.measure and args.engine == "llamacpp":
        return _llamacpp(args)
    if args.measure and args.engine == "vllm":
        return _vllm(args)
    if args.measure and args.engine not in (None, "draftsmith"):
        raise DraftsmithError(
            f"--measure times draftsmith's engine, llama.cpp or vLLM here, not {args.engine}"
        )

    given = drafter_acceptances(args.drafter) if getattr(args, "drafter", None) else None
    if given is not None and (args.bench or args.tau is not None):
        raise DraftsmithError("--drafter brings its own measured acceptance: leave out --bench and --tau")
    bench = bench_file.load(args.bench) if args.bench else None  # bad files fail before any model load
    link = hardware.pcie(args.pcie)
    if args.pcie_gb_per_token is None or not 0 < args.pcie_gb_per_token <= MAX_PCIE_GB_PER_TOKEN:
        raise DraftsmithError(
            f"--pcie-gb-per-token must be a positive number of GB up to {MAX_PCIE_GB_PER_TOKEN:g}, "
            f"got {args.pcie_gb_per_token!r}"
        )
    draft = model_spec.resolve(args.draft_model) if args.draft_model else None
    options = dict(
        context=args.context,
        answer_len=args.answer_len,
        concurrency=args.concurrency,
        methods=_split(args.method),
        tasks=_split(args.task),
        bench=bench,
        link=link,
        pcie_bytes_per_token=args.pcie_gb_per_token * 1e9,
        draft_model=draft,
        kv_bits=args.kv_bits,
        given_tau=_given_tau(args),
        acceptances=given,
    )
    comparison = None
    if args.measure:
        comparison, plan = _measured(args, bench, options)
    else:
        hw = hardware.resolve(args.gpu, args.cpu, args.bandwidth, args.tflops, args.vram)
        cpu = hardware.cpu_memory(args.cpu) if args.cpu and hw.kind != "cpu" else None
        spec = model_spec.resolve(args.model, args.bits)
        plan = build(spec, hw=hw, cpu=cpu, engine=args.engine, **options)
    if args.json:
        out = {"plan": plan.to_json()}
        if comparison is not None:
            out["predicted_vs_measured"] = [c.to_json() for c in comparison]
        print(json.dumps(out, indent=1))
        return 0
    print(markdown(plan))
    if comparison is not None:
        from draftsmith.planning.predict import comparison_table

        print(
            "## Predicted against measured (the bench's acceptance and drafting time, this machine's steps)\n"
        )
        print(comparison_table(comparison))
        machine = bench.machine
        print(
            f"\nbench measured on {machine.get('date')}, {machine.get('device')}, {machine.get('dtype')}, "
            f"{machine.get('cpu_threads')} threads ({machine.get('platform')}); predictions use this "
            "machine's calibration, so both should come from the same machine"
        )
    return 0


def _training_cost(args: argparse.Namespace) -> int:
    """`plan --train-answers N`: what building a drafter would take on the named hardware."""
    from draftsmith.planning import hardware, model_spec
    from draftsmith.planning.training_cost import estimate

    if args.train_answers < 1 or args.train_steps < 1 or args.devices < 1:
        raise DraftsmithError("--train-answers, --train-steps and --devices must be >= 1")
    methods = _split(args.method) or ["dspark"]
    if len(methods) > 1:
        raise DraftsmithError("--train-answers estimates one drafter: name one --method")
    hw = hardware.resolve(args.gpu, args.cpu, args.bandwidth, args.tflops, args.vram)
    spec = model_spec.resolve(args.model, args.bits)
    cost = estimate(spec, hw, methods[0], args.train_answers, args.train_steps, args.devices, args.answer_len)
    print(json.dumps(cost.to_json(), indent=1) if args.json else cost.markdown(hw, spec, methods[0]))
    return 0


def _measured(args: argparse.Namespace, bench, options: dict):
    from draftsmith.planning.measure import measure
    from draftsmith.planning.model_spec import EXAMPLES
    from draftsmith.planning.plan import build
    from draftsmith.planning.predict import compare

    clash = [f for f in ("gpu", "cpu", "bandwidth", "tflops", "vram", "bits") if getattr(args, f) is not None]
    if clash:
        flags = ", ".join("--" + f for f in clash)
        raise DraftsmithError(f"--measure uses this machine and the loaded model's dtype; drop {flags}")
    if args.model in EXAMPLES or (args.model and not Path(args.model).expanduser().exists()):
        raise DraftsmithError(
            f"--measure loads the model: give a directory or .gguf file (or nothing: the default target), "
            f"not {args.model!r}"
        )
    dtype = args.dtype or (bench.dtype if bench and bench.dtype else "auto")
    machine = measure(args.model, dtype, args.fixed_rows)
    steps = machine.steps
    comparison = compare(bench, steps.table, steps.fixed_rows, steps.overhead_s) if bench else None
    plan = build(steps.spec, measured=steps, **options)
    plan.notes[:0] = machine.notes()
    return comparison, plan


def _llamacpp(args: argparse.Namespace) -> int:
    """`plan --measure --engine llamacpp [--bench B]`: llama.cpp's verify curve on this machine and, from
    a bench's llama.cpp peers, each one's predicted speedup next to the measured one."""
    import torch

    from draftsmith.planning import llamacpp

    if not args.measure:
        raise DraftsmithError("--engine llamacpp measures this machine: add --measure")
    if args.bench and not Path(args.bench).is_file():
        raise DraftsmithError(f"bench result not found: {args.bench}")
    model = args.model
    if model is None:
        from draftsmith.models.loading import default_target_file

        model = default_target_file()
    if not str(model).endswith(".gguf") or not Path(model).is_file():
        raise DraftsmithError(f"--engine llamacpp measures a GGUF file, not {model!r}")
    curve = llamacpp.measure_curve(model, torch.get_num_threads())
    curve = llamacpp.measure_row_cost(model, curve, torch.get_num_threads())
    rows = llamacpp.compare(curve, args.bench) if args.bench else []
    plain = llamacpp.compare_plain(curve, args.bench) if args.bench else []
    plan = _curve_plan(args, model, curve)
    if args.json:
        print(
            json.dumps(
                {
                    "curve": curve.__dict__,
                    "predicted_vs_measured": [r.to_json() for r in rows],
                    "plain_predicted_vs_measured": [p.to_json() for p in plain],
                    "plan": plan.to_json(),
                }
            )
        )
    else:
        print(llamacpp.report(curve, rows, plain))
        from draftsmith.planning.render import markdown

        print()
        print(markdown(plan))
    return 0


def _vllm(args: argparse.Namespace) -> int:
    """`plan --measure --engine vllm [--bench B]`: vLLM's verify curve and each drafter's cost a round,
    timed inside vLLM on this machine, and from a bench's vLLM peers each one's predicted speedup next
    to the measured one. The drafters timed are the shipped ones (drafting cost depends on a drafter's
    shape, not its weights)."""
    import tempfile

    import torch

    from draftsmith.api import load_target
    from draftsmith.evaluation.vllm_peers import DRAFT_MAX, speculative_config, target_directory
    from draftsmith.planning import vllm

    if args.gpu or args.cpu:
        raise DraftsmithError("--measure --engine vllm times vLLM on this machine: leave out --gpu and --cpu")
    if args.bench and not Path(args.bench).is_file():
        raise DraftsmithError(f"bench result not found: {args.bench}")
    bench = json.loads(Path(args.bench).read_text()) if args.bench else {}
    dtype = args.dtype or bench.get("machine", {}).get("dtype") or "float32"
    drafts = int(bench.get("config", {}).get("k") or DRAFT_MAX)
    target = load_target(args.model, dtype="float32")
    model = target_directory(target)
    threads = torch.get_num_threads()
    log = Path(tempfile.mkdtemp(prefix="draftsmith-vllm-plan-")) / "profile.log"
    probes = [target.encode(p) for p in vllm.PROBES]
    peers = ["vllm-ngram", "vllm-eagle3", "vllm-dflash"]
    runs = vllm.curve_runs(target.tokenizer)
    for name in peers:
        runs.append(
            {
                "name": name,
                "speculative_config": speculative_config(name, target, {}, drafts),
                "prompts": probes,
                "max_tokens": 64,
            }
        )
    print(f"timing vLLM in {dtype} ({len(runs)} engine loads; log: {log})", file=sys.stderr)
    found = vllm.profile(model, dtype, runs, threads, log)
    curve = vllm.curve_from(
        {k: v for k, v in found.items() if not k.startswith("vllm-")},
        f"vLLM {dtype}, {threads} threads: engine steps, drafting excluded",
    )
    costs = {name: vllm.draft_cost(name, found[name], drafts) for name in peers}
    rows = vllm.compare(curve, costs, args.bench) if args.bench else []
    if args.json:
        print(
            json.dumps(
                {
                    "curve": curve.__dict__,
                    "drafting": {k: c.__dict__ for k, c in costs.items()},
                    "predicted_vs_measured": [r.to_json() for r in rows],
                }
            )
        )
    else:
        print(vllm.report(curve, costs, rows))
    return 0


def _curve_plan(args: argparse.Namespace, model, curve):
    """A plan priced by llama.cpp's verify curve measured here (acceptance typical unless --bench)."""
    from draftsmith.planning import model_spec
    from draftsmith.planning.backends import CostCurve
    from draftsmith.planning.plan import build
    from draftsmith.planning.steps import CurveSteps

    spec = model_spec.resolve(str(model))
    verify = {k: curve.verify_s(k) for k in curve.tokens}  # the server's steps: every row sampled
    relative = CostCurve.from_seconds(verify, curve.source)
    steps = CurveSteps(spec, relative, curve.seconds[0])
    return build(
        spec,
        measured=steps,
        context=args.context,
        answer_len=args.answer_len,
        methods=_split(args.method),
        tasks=_split(args.task),
        kv_bits=args.kv_bits,
    )


def _published(args: argparse.Namespace) -> int:
    """`plan --published`: every published case, predicted by the planner, against the published number."""
    from draftsmith.planning import published

    results = published.evaluate()
    if args.json:
        print(json.dumps({"cases": [r.to_json() for r in results], "summary": published.summary(results)}))
    else:
        print(published.markdown(results))
    return 0
