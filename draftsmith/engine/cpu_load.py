"""How much of the machine other processes used while we timed something.

Step-cost tables are measured once and cached: they pick the matmul layout of every step and the
draft length of every later run. One measured while another job shared the cores (a
regeneration ran, the cached plan drafted 1 token a round) silently slows everything after it. A
load check before the measurement misses jobs that start during it, and the load average lags by
minutes, so this measures during the timed block itself: machine-wide busy time from /proc/stat
minus this process's own CPU time is what the rest of the machine took.
"""

from __future__ import annotations

import logging
import os
import platform
from pathlib import Path

OTHER_LOAD_MAX = 0.2
"""Above this share of the machine's CPU time going to other processes, a timing table is used for
the current run only and not cached. An idle 2-core VM reads ~0.01; one competing single-thread job
on 2 cores reads ~0.5."""


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks summed over all cores since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return total - idle, total


def _own_seconds(pids: tuple[int, ...] = ()) -> float:
    """CPU seconds of this process, and of the processes `pids` (servers it started and times) with
    every process they started (a vLLM server's engine core and worker)."""
    t = os.times()
    total = t.user + t.system + sum(_process_seconds(pid) for pid in pids)  # a server gone: unknown
    for pid in _with_descendants(pids) - set(pids):
        try:
            total += _process_seconds(pid)
        except (OSError, ValueError, IndexError):  # a helper process that ended meanwhile
            pass
    return total


def _with_descendants(pids: tuple[int, ...]) -> set[int]:
    if not pids:
        return set()
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):  # gone meanwhile
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def _process_seconds(pid: int) -> float:
    """utime + stime of a running process, from /proc/PID/stat (fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return (int(fields[11]) + int(fields[12])) / hz


class OtherLoad:
    """Context manager: after the block, `fraction` is the share of the whole machine's CPU time that
    other processes used while it ran (0 to 1), or None where /proc/stat cannot be read. `pids`:
    processes whose work, and their children's, counts as ours (a bench's llama-server and vLLM peers)."""

    def __init__(self, pids: tuple[int, ...] = ()) -> None:
        self.fraction: float | None = None
        self.pids = tuple(pids)
        self._start: tuple[tuple[int, int], float] | None = None

    def __enter__(self) -> OtherLoad:
        try:
            self._start = (_machine_ticks(), _own_seconds(self.pids))
        except (OSError, ValueError, IndexError):
            self._start = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._start is None:
            return
        try:
            busy1, total1 = _machine_ticks()
            own1 = _own_seconds(self.pids)
        except (OSError, ValueError, IndexError):  # also a server that exited meanwhile: unknown
            return
        (busy0, total0), own0 = self._start
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        total = (total1 - total0) / hz
        if total <= 0:
            return
        others = (busy1 - busy0) / hz - (own1 - own0)
        self.fraction = min(max(others / total, 0.0), 1.0)


def cacheable(load: OtherLoad, what: str, command: str) -> bool:
    """Whether a table timed under `load` may be cached; where not, warn with the command that
    measures again. Unknown load (no /proc/stat) is trusted, as before this check existed."""
    if load.fraction is None or load.fraction <= OTHER_LOAD_MAX:
        return True
    logging.getLogger("draftsmith").warning(
        "other processes used %.0f%% of the CPU while %s were measured: the table serves this run "
        "only and is not cached; run `%s` when the machine is idle",
        100 * load.fraction, what, command,
    )
    return False


def cpu_name() -> str:
    """The CPU model, part of every timing table's cache key."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
