"""Keep freed memory in the process heap on glibc, so big CPU tensors stop costing page faults.

glibc serves every allocation over its mmap threshold (at most 32 MiB) with a fresh mmap and
unmaps it on free; the next step then faults the same pages in again and the kernel zeroes them.
A drafter training step allocates dozens of [batch, slots, draft vocab] fp32 tensors (~100 MiB
each), so about half its CPU time went to the kernel (`top`: 50% sys). Serving everything from the
heap and never trimming it keeps those pages mapped between steps. No-op off glibc or on GPUs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
_done = False


def keep_freed_memory() -> bool:
    """Switch glibc malloc to heap-only, never-trimmed allocation; True if it took effect."""
    global _done
    if _done:
        return True
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok = libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1) == 1
    except (OSError, AttributeError):
        return False
    _done = ok
    return ok
