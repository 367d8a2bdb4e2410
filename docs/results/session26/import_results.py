"""Issue 8, session 26: bring a GPU run's results into the project.

answers.npz (prompt index, the target's answer ids, whether it ended with EOS) joined with the
prompt texts pretokenize.py kept -> answer rows in the committed format (data/smollm2/README.md);
each DRAFTER.tgz -> a drafter directory (config.json, model.safetensors, train_log.jsonl).
Usage: python import_results.py RESULTS_DIR PROMPTS_JSONL_GZ ANSWERS_OUT.jsonl.gz DRAFTERS_DIR
"""

import gzip
import json
import sys
import tarfile
from pathlib import Path

import numpy as np

from draftsmith.models.target import Target


def main(results: str, prompts: str, answers_out: str, drafters: str) -> None:
    res = Path(results)
    rows = [json.loads(line) for line in gzip.open(prompts, "rt")]
    if (res / "answers.npz").is_file():
        z = np.load(res / "answers.npz")
        target = Target.load(dtype="float32", calibrate=False)
        eos = min(target.eos_ids)
        off, ids = z["offsets"], z["ids"]
        n_tok = 0
        with gzip.open(answers_out, "wt") as f:
            for k, i in enumerate(z["prompt_index"].tolist()):
                a = ids[off[k] : off[k + 1]].astype(int).tolist()
                if not a or len(target.encode(rows[i]["prompt"])) != int(z["prompt_len"][k]):
                    raise SystemExit(f"row {k}: prompt {i} does not match the ids the GPU answered")
                r = rows[i]
                f.write(json.dumps({
                    "id": r["id"], "prompt": r["prompt"], "category": r["category"],
                    "answer": target.decode(a), "answer_ids": a,
                    "finish_reason": "eos" if bool(z["eos"][k]) else "length",
                    "eos_id": eos, "new_tokens": len(a),
                }) + "\n")
                n_tok += len(a)
        print(f"{answers_out}: {len(z['prompt_index'])} answers, {n_tok} answer tokens "
              f"({float(z['seconds'][0]):.0f} s on the GPU)")
    for t in sorted(res.glob("*.tgz")):
        with tarfile.open(t) as tf:
            tf.extractall(drafters, filter="data")
        print(f"{t.name} -> {drafters}/{t.stem}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
