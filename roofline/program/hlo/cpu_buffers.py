"""Which outputs of a program run by XLA:CPU on a Linux host are fresh memory on each call.

XLA:CPU allocates a program's result buffers with the C library's aligned allocator on
every call. glibc serves a request of at least its mmap threshold from a fresh anonymous
mapping; the threshold rises as large blocks are freed, but never past 32 MiB on a 64-bit
system (``DEFAULT_MMAP_THRESHOLD_MAX``, mallopt(3)). So an output of 32 MiB or more is
fresh memory on every call, and the first write to each of its 4 KiB pages faults the page
in, at a cost ``roofline hardware measure`` times (``[overhead] first_touch``: 1.5 us a
page on one core of this project's host, where x + 1 reads and writes a page in place in
0.12 us).

Approximation: smaller outputs are taken as warm, served by heap memory that earlier calls
freed. Whether they are depends on the process's history of allocations (an output of 31
MiB in a process that has freed nothing so large is fresh too).
"""

from __future__ import annotations

import math

from roofline.program.hlo.op_cost import OpCost

FRESH_OUTPUT_BYTES = 32 << 20
PAGE_BYTES = 4096


def fresh_pages(op: OpCost) -> int:
    """Pages of ``op``'s output that are fresh memory when it runs as a program of its own."""
    if op.bytes_written < FRESH_OUTPUT_BYTES:
        return 0
    return math.ceil(op.bytes_written / PAGE_BYTES)
