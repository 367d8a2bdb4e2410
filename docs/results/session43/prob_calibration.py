"""Are DSpark's draft-token probabilities calibrated past the third slot? Decodes prompts with mixed
step shapes and full 7-token drafts (no length cut), and per slot j compares the mean product of the
first j token probabilities (what `length_by_probs` reads as draft j's survival) with how often the
first j drafts were all accepted.
Usage: python docs/results/session43/prob_calibration.py [METHOD] [N_PROMPTS_PER_SUITE]
"""

import sys

from draftsmith.drafters.registry import build_drafter
from draftsmith.engine.decode import speculative_generate
from draftsmith.engine.verify import verify
from draftsmith.evaluation.suites import load_suite
from draftsmith.models.target import Target

method = sys.argv[1] if len(sys.argv) > 1 else "dspark"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 3
target = Target.load(None, fixed_rows="mixed")
assert target.runner.mixed_shapes, "mixed shapes are not exact on this machine"
drafter = build_drafter(method, target)
log: list[tuple[list[float], int]] = []  # (token probs of the round's drafts, drafts accepted)


def logged_verify(logits, draft_tokens, draft_probs, params, rng):
    n_acc, bonus = verify(logits, draft_tokens, draft_probs, params, rng)
    log.append((list(drafter.token_probs[: len(draft_tokens)]), n_acc))
    return n_acc, bonus


for suite in ("humaneval", "gsm", "mtbench", "alpaca"):
    start = len(log)
    for p in load_suite(suite, n):
        ids = target.encode(p.text, chat=p.chat)
        stop = target.stop_rule(128)
        speculative_generate(target.runner, drafter, ids, stop, verifier=logged_verify, adaptive=False)
    got = log[start:]
    print(f"\n{suite}: {len(got)} rounds of {method}, full drafts")
    print("| slot j | mean product of the first j probabilities | share of rounds with >= j accepted |")
    print("|---|---|---|")
    for j in range(1, 8):
        rows = [(probs, acc) for probs, acc in got if len(probs) >= j]
        if not rows:
            break
        preds = []
        for probs, _ in rows:
            surv = 1.0
            for q in probs[:j]:
                surv *= q
            preds.append(surv)
        real = sum(acc >= j for _, acc in rows) / len(rows)
        print(f"| {j} | {sum(preds) / len(preds):.3f} | {real:.3f} |", flush=True)
