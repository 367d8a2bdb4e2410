"""Issue 8, session 32: is there a signal, free before DSpark drafts, that a round's first draft will fail?

Session 30's replay put a "skip oracle" (rounds whose first draft the target rejects draft nothing)
+0.20x ahead of the history rule on this CPU, and found the two free signals it tried useless (the
target's probability of its own token: first-slot AUC 0.53). The drafter's own first-slot
probability separates well (AUC 0.82) but costs the draft pass a skip would save. This fits a
logistic probe on what the target has already computed when a round starts: its final-norm state
before the anchor, the anchor (bonus) token's embedding, the states of the layers DSpark reads, and
scalars (the target's probability of the anchor and its entropy, the longest earlier match of the
context's suffix), on dev answers 0-14, and reports its first-slot AUC on answers 15-24 and a
replay (prob_power_sim.replay's rule, with its skip: no draft when the probe's p < threshold) over the
saved 6-slot drafts of session 30 (DEV_DIR/drafts6-*.pt).
EXTRA=labels.pt (skip_labels.py) adds first-slot labels on training answers to the fit set; L2 the
penalties tried.
Usage: [SCALE=1.7] [EXTRA=labels.pt] [L2=a,b] python docs/results/session32/skip_probe.py DEV_DIR
"""

import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session28"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "session31"))
from prob_power_sim import replay  # noqa: E402
from walk_lib import SUITES, dev_rows  # noqa: E402

from draftsmith.api import load_target  # noqa: E402
from draftsmith.drafters.registry import build_drafter  # noqa: E402
from draftsmith.engine.runner import FINAL  # noqa: E402

SCALE = float(os.environ.get("SCALE", "1"))
L2 = tuple(float(x) for x in os.environ.get("L2", "1e-3,1e-2,1e-1").split(","))
target = load_target(dtype="float32", fixed_rows=0)
cost = target.runner.step_cost
charged = {n: cost[1] * (1 + SCALE * (c / cost[1] - 1)) for n, c in cost.items()}
dspark = build_drafter("dspark", target)
layers = dspark.hidden_layers
embed = target.model.get_input_embeddings().weight


def suffix_match(ids: list[int], end: int, longest: int = 8) -> int:
    """Length of the longest suffix of ids[:end] (up to `longest`) that occurred earlier."""
    best = 0
    for n in range(1, longest + 1):
        if end - n < 1:
            break
        pat = ids[end - n : end]
        if any(ids[s : s + n] == pat for s in range(0, end - n)):
            best = n
        else:
            break
    return best


def features(row: dict) -> dict[str, torch.Tensor]:
    """Per answer position j (anchor a = len(prompt) - 1 + j): feature groups, as the walk aligns them."""
    return features_and_states(row)[0]


def features_and_states(row: dict) -> tuple[dict[str, torch.Tensor], torch.Tensor, int, dict]:
    """`features`, plus prompt + answer ids, the prompt's length and the target's states for DSpark."""
    ids = torch.tensor(target.encode(row["prompt"], chat=True))
    answer = row["answer_ids"][:128]
    full = torch.cat([ids, torch.tensor(answer, dtype=ids.dtype)])
    target.runner.reset(len(full) + 8)
    out = target.runner.forward(full, n_logits=len(full), hidden=(*layers, FINAL))
    anchors = torch.arange(len(answer)) + len(ids) - 1
    prev = anchors - 1  # the last position whose target states exist when the round starts
    logp = out.logits[prev].float().log_softmax(-1)
    p_anchor = logp.gather(1, full[anchors][:, None]).exp()
    entropy = -(logp.exp() * logp).sum(-1, keepdim=True)
    flat = full.tolist()
    match = torch.tensor([[suffix_match(flat, int(a) + 1)] for a in anchors], dtype=torch.float32)
    scalars = torch.cat([p_anchor, entropy, match / 8, (torch.arange(len(answer))[:, None] / 128)], 1)
    feats = dict(
        scalars=scalars,
        final=out.hidden[FINAL][prev].float(),
        token=embed[full[anchors]].float(),
        layers=torch.cat([out.hidden[k][prev].float() for k in layers], 1),
    )
    return feats, full, len(ids), {k: out.hidden[k] for k in layers}


def auc(score: torch.Tensor, label: torch.Tensor) -> float:
    order = score.argsort()
    ranks = torch.empty_like(order, dtype=torch.float64)
    ranks[order] = torch.arange(1, len(score) + 1, dtype=torch.float64)
    pos = label.bool()
    n1, n0 = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def fit(x: torch.Tensor, y: torch.Tensor, l2: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """L2-regularised logistic regression on standardised features (LBFGS); returns (mean, std, w)."""
    mu, sd = x.mean(0), x.std(0) + 1e-6
    z = torch.cat([(x - mu) / sd, torch.ones(len(x), 1)], 1).double()
    w = torch.zeros(z.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w], max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z @ w, y.double())
        loss = loss + l2 * (w[:-1] ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return mu, sd, w.detach()


def predict(model, x: torch.Tensor) -> torch.Tensor:
    mu, sd, w = model
    return torch.sigmoid(torch.cat([(x - mu) / sd, torch.ones(len(x), 1)], 1).double() @ w).float()


def main() -> None:
    dev = Path(sys.argv[1])
    sets = {"fit": (0, 15), "test": (15, 10)}
    feats, labels, drafts = {}, {}, {}
    with torch.inference_mode():
        for name, (first, n) in sets.items():
            saved = torch.load(dev / f"drafts6-{first}-{n}.pt")
            feats[name], labels[name], drafts[name] = {}, {}, saved
            for suite in SUITES:
                per = [features(r) for r in dev_rows(str(dev), suite, first, n)]
                for a, rows in zip(per, saved[suite], strict=True):
                    assert len(next(iter(a.values()))) == len(rows)
                feats[name][suite] = per
                labels[name][suite] = [torch.tensor([h >= 1 for h, _ in rows]) for rows in saved[suite]]
    groups = {
        "scalars": ("scalars",),
        "scalars+final": ("scalars", "final"),
        "scalars+final+token": ("scalars", "final", "token"),
        "all (+ DSpark's layers)": ("scalars", "final", "token", "layers"),
    }

    extra = torch.load(os.environ["EXTRA"]) if os.environ.get("EXTRA") else None

    def stack(name: str, keys: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        xs = [torch.cat([a[k] for k in keys], 1) for s in SUITES for a in feats[name][s]]
        ys = [y for s in SUITES for y in labels[name][s]]
        if name == "fit" and extra is not None:  # skip_labels.py's training answers join the fit set
            xs += [torch.cat([extra["feats"][k][i] for k in keys], 1) for i in range(len(extra["labels"]))]
            ys += list(extra["labels"])
        return torch.cat(xs), torch.cat(ys)

    print("| features | dims | l2 | fit AUC | test AUC |\n|---|---|---|---|---|")
    best = None
    for label, keys in groups.items():
        xf, yf = stack("fit", keys)
        xt, yt = stack("test", keys)
        for l2 in L2:
            model = fit(xf, yf, l2)
            a_fit, a_test = auc(predict(model, xf), yf), auc(predict(model, xt), yt)
            print(f"| {label} | {xf.shape[1]} | {l2:g} | {a_fit:.3f} | {a_test:.3f} |")
            if best is None or a_test > best[0]:
                best = (a_test, label, keys, l2, model)
    a_test, label, keys, l2, model = best
    print(f"\nreplay with the best probe ({label}, l2 {l2:g}, test AUC {a_test:.3f}); SCALE {SCALE}")
    thresholds = (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4)
    for name in sets:
        print(f"\n{name} answers | " + " | ".join(f"skip < {t}" for t in thresholds) + " |")
        print("|---|" + "---|" * len(thresholds))
        means = {t: [] for t in thresholds}
        for suite in SUITES:
            cells = []
            for t in thresholds:
                tok = sec = 0.0
                for a, rows in zip(feats[name][suite], drafts[name][suite], strict=True):
                    p = predict(model, torch.cat([a[k] for k in keys], 1)).tolist()
                    x, y, _ = replay(rows, cost, charged=charged, skip=[q < t for q in p])
                    tok, sec = tok + x, sec + y
                means[t].append(tok / sec * charged[1])
                cells.append(f"{means[t][-1]:.3f}x")
            print(f"| {suite} | " + " | ".join(cells) + " |")
        print("| mean | " + " | ".join(f"{statistics.mean(v):.3f}x" for v in means.values()) + " |")


if __name__ == "__main__":
    main()
