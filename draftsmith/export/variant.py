"""The drafter another engine runs, from one that carries more: `export --no-lookup` (without the
prompt-lookup input, which no serving engine computes) and `export --draft-vocab N` (the head cut to
the N most frequent answer tokens, FR-Spec, for the formats that carry a draft vocabulary). The same
transforms decoding applies (`DFlashDecodeOptions.lookup`, `.draft_vocab`), so what is exported drafts
exactly what `--no-lookup` / `--draft-vocab N` draft in draftsmith's engine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from draftsmith.errors import DraftsmithError


def check(directory: Path, method: str, lookup: bool, draft_vocab: int | None) -> None:
    """Refuse, before anything loads, a variant this drafter cannot give."""
    from draftsmith.export.common import read_config

    if (not lookup or draft_vocab) and method not in ("dflash", "dspark"):
        raise DraftsmithError("--no-lookup and --draft-vocab apply to DFlash and DSpark drafters only")
    if not lookup and not (read_config(Path(directory)) or {}).get("lookup_input"):
        raise DraftsmithError("--no-lookup: this drafter has no prompt-lookup input to leave out")
    if draft_vocab is not None and draft_vocab < 0:
        raise DraftsmithError(f"--draft-vocab must be >= 0 (0 = no cut), got {draft_vocab}")


def prepare(directory: Path, target, lookup: bool, draft_vocab: int | None, out: Path) -> list[str]:
    """Write the drafter as `--no-lookup` / `--draft-vocab N` decode it (`decoding_view`) to `out`
    (draftsmith's own format, for the exporters); returns what it tells the user (what the export
    loses, as measured)."""
    from draftsmith.drafters.checkpoint import STS_FILE
    from draftsmith.drafters.dflash.checkpoint import load_drafter, save_drafter
    from draftsmith.drafters.dflash.drafter import decoding_view
    from draftsmith.export import stored_dtype

    dtype = stored_dtype(directory)
    model = load_drafter(directory, target, dtype=dtype)
    view = decoding_view(model, lookup, draft_vocab or 0)
    notes = [] if lookup else [lookup_loss(directory)]
    if view.d2t.shape[0] < model.d2t.shape[0]:
        notes.append(f"head cut to the {view.d2t.shape[0]} most frequent answer tokens (FR-Spec)")
    save_drafter(view, out, dtype=dtype)
    if (directory / STS_FILE).is_file():
        shutil.copy(directory / STS_FILE, out / STS_FILE)
    return notes


def lookup_loss(directory: Path) -> str:
    """What leaving the lookup input out costs, from the held-out scores saved at training."""
    from draftsmith.training.train import HELD_OUT_FILE

    file = directory / HELD_OUT_FILE
    try:
        scores = json.loads(file.read_text())
        with_, without = scores["held_out_tau_greedy_k3"], scores["held_out_tau_greedy_k3_no_lookup"]
    except (OSError, ValueError, KeyError, TypeError):
        return (
            "without its prompt-lookup input; what that costs was not measured at training "
            f"(no {HELD_OUT_FILE} with both scores): `draftsmith score` reports both"
        )
    return (
        f"without its prompt-lookup input: held-out accepted length (3 drafts) {without:.3f} against "
        f"{with_:.3f} with it ({without - with_:+.3f}), on {scores.get('sequences', '?')} held-out "
        f"answers at training step {scores.get('step', '?')}"
    )
