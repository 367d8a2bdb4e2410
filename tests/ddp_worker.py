"""Run by tests under torchrun: trains a tiny drafter with DistributedDataParallel (gloo on CPU)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from conftest import tiny_target  # noqa: E402

from draftsmith.training.cache import TargetCache  # noqa: E402
from draftsmith.training.train import TrainConfig, train  # noqa: E402

if __name__ == "__main__":
    cache_dir, out_dir = sys.argv[1], sys.argv[2]
    target = tiny_target()
    cfg = TrainConfig.from_flat(
        method="dspark",
        steps=2,
        batch=4,
        anchors=4,
        block_size=4,
        markov_rank=8,
        draft_vocab=48,
        eval_every=2,
        save_every=2,
        held_out=1,
    )
    print(train(target, TargetCache(cache_dir, target), cfg, out_dir, progress=False))
