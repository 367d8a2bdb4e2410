"""Append-only JSONL that survives interruption: resume skips finished ids, a torn last line is dropped."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

from draftsmith.errors import DraftsmithError


def read_rows(path: str | Path) -> Iterator[dict]:
    """Rows of a JSONL file (or .jsonl.gz); a clear error names the first broken line."""
    p = Path(path)
    if not p.is_file():
        raise DraftsmithError(f"file not found: {path}")
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt", encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except ValueError as e:
                raise DraftsmithError(f"{path}:{n}: invalid JSON ({e})") from e


def repair_tail(path: Path) -> None:
    """Cut a half-written last line (the process died mid-write) so appends stay valid JSONL."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    with path.open("r+b") as f:
        f.truncate(keep)


def done_ids(path: Path) -> set[str]:
    repair_tail(path)
    if not path.is_file():
        return set()
    return {str(row["id"]) for row in read_rows(path) if "id" in row}


class Appender:
    """Writes one row per line and makes it durable before the next one is generated."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_tail(self.path)
        self.f = self.path.open("a", encoding="utf-8")

    def write(self, row: dict) -> None:
        self.f.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.f.flush()
        os.fsync(self.f.fileno())

    def close(self) -> None:
        self.f.close()

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
