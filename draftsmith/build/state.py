"""A build directory's record of itself (DIR/build.json): the settings it was started with, and each
stage's status, wall time and results. A stage that finished is never run again; one that was killed
reruns and picks up what its own outputs already hold (answers written, cache shards, training
checkpoints). The file is replaced atomically, so a kill never leaves half a record."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from draftsmith.errors import DraftsmithError

RECORD = "build.json"
FORMAT = "draftsmith-build/1"


class BuildState:
    def __init__(self, out: Path, settings: dict[str, Any]) -> None:
        """Open (or start) the build in `out`; a build started with other settings is refused by name,
        since its finished stages would not be what these settings ask for."""
        self.out = out
        self.path = out / RECORD
        if out.exists() and not out.is_dir():
            raise DraftsmithError(f"--out {out} is a file; give a directory")
        if self.path.is_file():
            try:
                record = json.loads(self.path.read_text())
            except ValueError as e:
                raise DraftsmithError(f"{self.path} is not readable ({e}); use another --out") from e
            if record.get("format") != FORMAT:
                raise DraftsmithError(f"{out} holds no draftsmith build; use another --out")
            old = record["settings"]
            diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
            if diff:
                shown = "; ".join(f"{k}: {old.get(k)!r} then, {settings.get(k)!r} now" for k in diff[:3])
                raise DraftsmithError(f"{out} holds a build with other settings ({shown}); use another --out")
            self.record = record
        else:
            if out.is_dir() and any(out.iterdir()):
                raise DraftsmithError(f"--out {out} is a directory with other files; give a new or empty one")
            self.record = {"format": FORMAT, "settings": settings, "stages": {}, "notes": []}
        out.mkdir(parents=True, exist_ok=True)
        self.save()

    @property
    def stages(self) -> dict[str, dict]:
        return self.record["stages"]

    def done(self, name: str) -> bool:
        return self.stages.get(name, {}).get("status") == "done"

    def result(self, name: str) -> dict:
        return self.stages.get(name, {}).get("result", {})

    def elapsed(self) -> float:
        """Seconds spent in stages so far (finished ones and the runs of unfinished ones), not the
        time between a kill and its rerun: what a --budget counts."""
        return sum(s.get("seconds", 0.0) for s in self.stages.values())

    def put(self, key: str, value: Any) -> None:
        """A decision later runs must repeat (e.g. the step count a budget chose), kept with the build."""
        self.record[key] = value
        self.save()

    def note(self, text: str) -> None:
        if text not in self.record["notes"]:
            self.record["notes"].append(text)
            self.save()

    def run(self, name: str, work: Callable[[], dict], estimate: str = "") -> dict:
        """Run a stage unless it finished before; print its start (with `estimate`) and end."""
        if self.done(name):
            print(f"build: {name}: done before ({self.stages[name]['seconds']:.0f} s), reused", flush=True)
            return self.result(name)
        entry = self.stages.setdefault(name, {"seconds": 0.0})
        entry["status"] = "running"
        entry["runs"] = entry.get("runs", 0) + 1
        self.save()
        print(f"build: {name}: started" + (f" ({estimate})" if estimate else ""), flush=True)
        t0 = time.perf_counter()
        try:
            result = work()
        finally:  # an interrupted stage's time still counts against the budget
            entry["seconds"] = round(entry["seconds"] + time.perf_counter() - t0, 1)
            self.save()
        entry.update(status="done", result=result)
        self.save()
        print(f"build: {name}: done in {entry['seconds']:.0f} s", flush=True)
        return result

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record, indent=1))
        os.replace(tmp, self.path)
