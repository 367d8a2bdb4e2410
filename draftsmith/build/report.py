"""The build's report (DIR/report.md, plots in DIR/plots/): did the drafter pay, where, and how to
deploy it. Every number in it comes from this build's own records (build.json, the training log,
bench.json); the plan for other hardware is labelled as a prediction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from draftsmith.build.stages import BuildSettings, bench_methods

LABELS = {"plain": "plain", "ngram": "n-gram"}


def _label(method: str, base: str) -> str:
    if method == base:
        return f"{base} (yours)"
    if method.endswith(":start"):
        return f"{base} (start)"
    return LABELS.get(method, method)


def _plots(
    out: Path, log: list[dict], score: dict, bench: dict, s: BuildSettings, methods: list[str]
) -> list[str]:
    """PNG plots beside the report; matplotlib's file backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = out / "plots"
    folder.mkdir(exist_ok=True)
    made = []

    evals = [r for r in log if "held_out_tau" in r]
    if evals:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([r["step"] for r in evals], [r["held_out_tau"] for r in evals], "o-", label="yours")
        if "held_out_tau_no_lookup" in evals[0]:
            steps = [r["step"] for r in evals]
            ax.plot(
                steps, [r["held_out_tau_no_lookup"] for r in evals], "s--", label="yours, no lookup input"
            )
        start = score.get("start_scores", {}).get("all", {})
        if start.get("tau"):
            ax.axhline(start["tau"], color="C0", linestyle=":", label="the drafter it started from")
        if start.get("tau_no_lookup") and "held_out_tau_no_lookup" in evals[0]:
            ax.axhline(
                start["tau_no_lookup"], color="C1", linestyle=":", label="... without its lookup input"
            )
        ax.set_xlabel("training step")
        ax.set_ylabel("held-out tau (every slot)")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(folder / "held_out_tau.png", dpi=110)
        plt.close(fig)
        made.append("held_out_tau.png")

    summaries = bench.get("summaries", [])
    suites = sorted({m["suite"] for m in summaries if m["suite"] != "all"})
    overall = "all" if len(suites) > 1 else (suites[0] if suites else None)
    by = {(m["suite"], m["method"]): m for m in summaries}
    drafting = [m for m in methods if m != "plain"]

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for m in drafting:
        row = by.get((overall, m))
        if row and row["acceptance_by_position"]:
            acc = row["acceptance_by_position"]
            ax.plot(range(1, len(acc) + 1), acc, "o-", label=_label(m, s.method))
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted, among rounds drafting that far")
    ax.set_ylim(0, 1)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "acceptance_by_position.png", dpi=110)
    plt.close(fig)
    made.append("acceptance_by_position.png")

    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / max(1, len(drafting))
    for i, m in enumerate(drafting):
        ys = [(by.get((suite, m)) or {}).get("speedup_median") or 0 for suite in suites]
        ax.bar([j + i * width for j in range(len(suites))], ys, width, label=_label(m, s.method))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([j + width * (len(drafting) - 1) / 2 for j in range(len(suites))], suites)
    ax.set_ylabel("speedup over plain")
    ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "speedup_by_category.png", dpi=110)
    plt.close(fig)
    made.append("speedup_by_category.png")

    fig, ax = plt.subplots(figsize=(6, 3))
    rows = [(m, by.get((overall, m))) for m in drafting]
    rows = [(m, r) for m, r in rows if r and r.get("draft_ms") is not None]
    names = [_label(m, s.method) for m, _ in rows]
    ax.barh(names, [r["draft_ms"] for _, r in rows], label="drafting")
    ax.barh(
        names, [r["verify_ms"] for _, r in rows], left=[r["draft_ms"] for _, r in rows], label="verification"
    )
    ax.set_xlabel("ms a round")
    ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "round_time.png", dpi=110)
    plt.close(fig)
    made.append("round_time.png")
    return made


def verdict(s: BuildSettings, score: dict, log: list[dict], steps: dict, record: dict) -> str:
    """One paragraph: did training on these prompts beat the drafter it started from, and if not,
    what the build's own numbers say about why."""
    yours = score.get("yours", {}).get("all", {}).get("tau")
    start = score.get("start_scores", {}).get("all", {}).get("tau")
    if yours is None:
        return "No held-out score was recorded."
    if start is None:
        return f"Trained from scratch: held-out tau {yours:.3f} (every slot, teacher-forced)."
    evals = [(r["step"], r["held_out_tau"]) for r in log if "held_out_tau" in r]
    trend = ""
    if len(evals) >= 2:
        half = next((e for e in evals if e[0] >= evals[-1][0] / 2), evals[0])
        rise = evals[-1][1] - half[1]
        trend = f" From step {half[0]} to {evals[-1][0]} it moved {rise:+.3f}: " + (
            "still rising, so more steps (a larger --budget) should lift it further."
            if rise > 0.005
            else "flat or falling, so more of your answers, not more steps, is what would lift it."
        )
    answers = record["stages"].get("answers", {}).get("result", {}).get("train", {})
    base = (
        f"{answers.get('answers', '?')} answers ({answers.get('new_tokens', '?')} tokens), "
        f"{steps.get('steps')} steps"
    )
    if yours > start:
        return (
            f"It pays: held-out tau {yours:.3f} against {start:.3f} for the drafter it started from "
            f"({yours - start:+.3f}), after {base}.{trend}"
        )
    return (
        f"It does not beat the drafter it started from: held-out tau {yours:.3f} against {start:.3f} "
        f"({yours - start:+.3f}) after {base}. The shipped drafter already predicts these prompts about as "
        f"well as this budget can teach.{trend}"
    )


def _bench_table(bench: dict, s: BuildSettings, methods: list[str]) -> str:
    summaries = bench.get("summaries", [])
    suites = sorted({m["suite"] for m in summaries})
    by = {(m["suite"], m["method"]): m for m in summaries}
    head = "| category | " + " | ".join(_label(m, s.method) for m in methods) + " |"
    lines = [head, "|---" * (len(methods) + 1) + "|"]
    for suite in suites:
        cells = []
        for m in methods:
            r = by.get((suite, m))
            if r is None:
                cells.append("-")
            elif m == "plain":
                cells.append(f"{r['tok_s_median']:.1f} tok/s")
            else:
                tau = f" ({r['tau']:.2f})" if r.get("tau") else ""
                same = (
                    f", {r['identical']}/{r['prompts']} identical" if r.get("identical") is not None else ""
                )
                cells.append(f"{r['speedup_median']:.2f}x{tau}{same}")
        lines.append(f"| {suite} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plan_section(s: BuildSettings, out: Path) -> str:
    """The planner's prediction for --gpu/--cpu from this build's measured acceptance by position."""
    if not (s.gpu or s.cpu):
        return (
            "No hardware was named (`--gpu` or `--cpu`): the numbers above are this machine's. "
            f"`draftsmith plan --drafter {out / 'drafter'} --gpu 4090 --model qwen3-8b` predicts another."
        )
    from draftsmith.planning.command import drafter_plan

    plan = drafter_plan(out / "drafter", s.gpu, s.cpu, s.plan_model, s.bits)
    rows = [m for m in plan.methods if m.method in (s.method, "ngram")]
    lines = ["| method | category | drafts | predicted speedup |", "|---|---|---|---|"]
    lines += [f"| {_label(m.method, s.method)} | {m.task} | {m.k} | {m.speedup:.2f}x |" for m in rows]
    hw = plan.hardware.get("name") or s.gpu or s.cpu
    return (
        f"Predicted by the planner (not measured) for {hw}, {plan.model.get('name')}, from this build's "
        "acceptance by draft position:\n\n" + "\n".join(lines) + f"\n\n{plan.recommendation}"
    )


def write_report(out: Path, s: BuildSettings, record: dict) -> dict[str, Any]:
    stages = record["stages"]
    result = lambda name: stages.get(name, {}).get("result", {})  # noqa: E731
    log_path = out / "drafter" / "train_log.jsonl"
    log = [json.loads(x) for x in log_path.read_text().splitlines()] if log_path.is_file() else []
    score = result("score")
    bench = json.loads((out / "bench.json").read_text()) if (out / "bench.json").is_file() else {}
    fine_tuned = bool(result("train").get("init_from"))
    methods = bench_methods(s, fine_tuned)
    plots = _plots(out, log, score, bench, s, methods)
    steps = record.get("steps", {})
    minutes = sum(x.get("seconds", 0) for x in stages.values()) / 60
    parts = [
        f"# Your {s.method} drafter\n",
        f"Built by `draftsmith build` from {result('prompts').get('user')} prompts ({s.prompts}): "
        f"{result('prompts').get('train')} trained on, {result('prompts').get('held_out')} held out; "
        f"{steps.get('steps')} training steps ({steps.get('from')})"
        + (f" from {result('train').get('init_from')}" if fine_tuned else " from scratch")
        + f"; {minutes:.1f} min in all"
        + (f" against a {s.budget_s / 60:.0f} min budget" if s.budget_s else "")
        + ".\n",
        "## Verdict\n",
        verdict(s, score, log, steps, record) + "\n",
        "## Held-out accepted length\n",
        "Teacher-forced on the held-out answers (tau: tokens a round at every slot; k3: at 3 drafts):\n",
        _score_table(score, s),
        "\n![held-out tau over training](plots/held_out_tau.png)\n",
        "## In draftsmith's engine (measured here)\n",
        "Speedup over plain decoding (tokens a target step), greedy, 2 repeats, medians:\n",
        _bench_table(bench, s, methods),
        "",
        *[f"- {n}" for n in result("bench").get("noise", [])],
        "\n![acceptance by draft position](plots/acceptance_by_position.png)",
        "![speedup by category](plots/speedup_by_category.png)",
        "![drafting and verification time a round](plots/round_time.png)\n",
        "## Deploy\n",
        _deploy(result("export")),
        "\n## On other hardware\n",
        _plan_section(s, out),
    ]
    if record.get("notes"):
        parts += ["\n## Notes\n", *[f"- {n}" for n in record["notes"]]]
    (out / "report.md").write_text("\n".join(parts) + "\n")
    return {"report": "report.md", "plots": plots}


def _score_table(score: dict, s: BuildSettings) -> str:
    rows = [("yours", score.get("yours", {}))]
    if score.get("start_scores"):
        rows.append(("the drafter it started from", score["start_scores"]))
    cats = sorted(k for k in (rows[0][1] or {}) if k != "all")
    lines = ["| drafter | all (k3) | " + " | ".join(cats) + " |", "|---" * (len(cats) + 2) + "|"]
    for name, sc in rows:
        a = sc.get("all", {})
        extra = f" (no lookup input: {a['tau_no_lookup']:.3f})" if "tau_no_lookup" in a else ""
        cells = [f"{a.get('tau', 0):.3f} ({a.get('tau_k3', 0):.3f}){extra}"]
        cells += [f"{sc.get(c, {}).get('tau', 0):.3f}" for c in cats]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _deploy(exports: dict) -> str:
    lines = []
    for engine, e in exports.items():
        if "command" in e:
            notes = "".join(f"; {n}" for n in e.get("notes", []))
            lines.append(
                f"- **{engine}** ({e['format']}, `{e['path']}`{notes}):\n\n  ```bash\n  {e['command']}\n  ```"
            )
        else:
            lines.append(f"- **{engine}**: {e.get('skipped') or 'export failed: ' + e.get('failed', '?')}")
    return "\n".join(lines) or "No export was written."
