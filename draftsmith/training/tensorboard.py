"""TensorBoard event files for a training run (OUT/tensorboard), where the `tensorboard` package is
installed: the curves practitioners read, written from the same rows as train_log.jsonl."""

from __future__ import annotations

from pathlib import Path

EVENTS = "tensorboard"


class Curves:
    """Scalars of each logged row (loss, accepted-length estimates, learning rate, held-out scores);
    a no-op without the package. A resumed run appends to the same folder at its own steps."""

    def __init__(self, out: Path, enabled: bool = True) -> None:
        self.writer = None
        if not enabled:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is optional (`pip install draftsmith[tensorboard]`)
            return
        self.writer = SummaryWriter(log_dir=str(out / EVENTS))

    def add(self, row: dict) -> None:
        if self.writer is None:
            return
        for key, value in row.items():
            if key != "step" and isinstance(value, (int, float)) and not isinstance(value, bool):
                group = "held_out" if key.startswith("held_out_") else "train"
                self.writer.add_scalar(f"{group}/{key.removeprefix('held_out_')}", value, row["step"])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
