"""Keep a distilled draft in git at a third of its size: its embedding and lm_head are the target's
own (frozen in training), so `pack` stores everything else and `unpack` puts the target's back.

    python docs/results/distilled_pack.py pack DRAFT_DIR PACKED_DIR [--target T] [--dtype D]
    python docs/results/distilled_pack.py unpack PACKED_DIR DRAFT_DIR [--target T] [--dtype D]

--dtype is the target's dtype in training (`train --dtype`, bfloat16 in docs/results/train-long.sh):
the draft's embedding and head are the target's weights in that dtype.

`pack` refuses a draft whose embedding or head differ from the target's (then nothing can be
rebuilt); `unpack` writes the same standard HF directory `draftsmith train --method distilled`
wrote (fp16), which `--method draft-model --draft-model DRAFT_DIR` loads.
"""

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from draftsmith.api import load_target
from draftsmith.drafters.checkpoint import target_fingerprint
from draftsmith.drafters.distilled.checkpoint import META, check_target, save_draft
from draftsmith.drafters.distilled.model import DistilledDraft, build_draft_lm

WEIGHTS = "layers.safetensors"


def borrowed(lm) -> dict[str, torch.Tensor]:
    """Names and values of the tensors the draft shares with its target (embedding, head)."""
    ids = {id(lm.get_input_embeddings().weight), id(lm.get_output_embeddings().weight)}
    return {k: v for k, v in lm.state_dict(keep_vars=True).items() if id(v) in ids}


def pack(src: Path, out: Path, target) -> None:
    check_target(src, target)
    state = load_file(src / "model.safetensors")
    meta = json.loads((src / META).read_text())
    lm = build_draft_lm(target.model, meta["source_layers"])
    for name, value in borrowed(lm).items():
        ours = state.get(name)
        if ours is not None and not torch.equal(ours.float(), value.detach().to(ours.dtype).float()):
            raise SystemExit(f"{src}: {name} is not the target's; this draft cannot be packed")
        state.pop(name, None)
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, out / WEIGHTS)
    for name in (META, "train_config.json", "train_log.jsonl"):
        if (src / name).is_file():
            shutil.copy(src / name, out / name)
    print(f"{out / WEIGHTS}: {len(state)} tensors, {(out / WEIGHTS).stat().st_size / 2**20:.1f} MiB")


def unpack(src: Path, out: Path, target) -> None:
    meta = json.loads((src / META).read_text())
    if meta.get("target_fingerprint") != target_fingerprint(target):
        raise SystemExit(f"{src} was distilled from {meta.get('target_name')!r}, not {target.name!r}")
    draft = DistilledDraft(
        build_draft_lm(target.model, meta["source_layers"]), meta["source_layers"], meta["layer_init"], target
    )
    state = {k: v.float() for k, v in load_file(src / WEIGHTS).items()}
    missing, unexpected = draft.lm.load_state_dict(state, strict=False)
    left = set(missing) - set(borrowed(draft.lm))
    if left or unexpected:
        raise SystemExit(f"{src}: missing {sorted(left)}, unexpected {sorted(unexpected)}")
    save_draft(draft, out, torch.float16)
    for name in ("train_config.json", "train_log.jsonl"):
        if (src / name).is_file():
            shutil.copy(src / name, out / name)
    print(f"{out}: rebuilt with the target's embedding and head")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["pack", "unpack"])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--target", default=None, help="the target (default: the embedded SmolLM2)")
    ap.add_argument("--dtype", default="bfloat16", help="the target's dtype in training (train --dtype)")
    a = ap.parse_args()
    target = load_target(a.target, dtype=a.dtype)
    (pack if a.action == "pack" else unpack)(a.src, a.out, target)


if __name__ == "__main__":
    main()
