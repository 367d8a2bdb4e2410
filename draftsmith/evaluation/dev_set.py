"""Bench-shaped dev prompts: the suite items right after the ones the bench decodes.

Why: held-out answers to training-mix prompts ranked two drafters the other way round from the bench
(a continued DSpark +0.04 capped tau there, -0.04 bench tau). Answers the target writes to
suite items the bench does not decode (items ``skip .. skip+n-1``; the bench takes the first ``--limit``,
10 by default) ranked the same three drafters as the bench on 11 of 12 suite-pairs. Score drafters on
them (``draftsmith score``), or cache them and pass ``train --held-out-cache`` to watch a run on them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from draftsmith.errors import DraftsmithError
from draftsmith.evaluation.suites import load_suite


def write_dev_prompts(
    suites: list[str], skip: int, n: int, out: str | os.PathLike[str]
) -> dict[str, int]:
    """Write ``out/<suite>.jsonl`` (id, prompt, category) for items ``skip..skip+n-1`` of each suite.

    Returns the prompts written per suite. A suite with fewer items writes what it has; one with none
    past ``skip`` is an error, since an empty dev file would score as nothing.
    """
    if skip < 0 or n < 1:
        raise DraftsmithError(f"--skip must be >= 0 and --n >= 1, got {skip} and {n}")
    if not suites:
        raise DraftsmithError("no suites given")
    picked = {}
    for suite in suites:
        items = load_suite(suite, skip + n)[skip:]
        if not items:
            raise DraftsmithError(f"suite '{suite}' has no items past the first {skip}")
        picked[suite] = items
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    counts = {}
    for items in picked.values():
        name = items[0].suite  # the registered name, or a user file's stem
        with open(root / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for p in items:
                f.write(json.dumps({"id": p.id, "prompt": p.text, "category": name}) + "\n")
        counts[name] = len(items)
    return counts
