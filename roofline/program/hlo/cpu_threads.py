"""How XLA:CPU puts work on threads: the tasks it splits an op into, and which programs
run on the caller's thread.

Tasks. XLA:CPU (``xla/service/cpu/parallel_task_assignment.cc``, the jaxlib pinned here) splits
an op it emits as a loop into tasks over the op's outer dimensions and runs them on its
thread pool (``outer_dimension_partitions`` in the compiled op's ``backend_config``). How
many, its cost model decides from XLA's cost analysis of the op and the number of cores
the compiling process may use:

- an op with at most one FLOP per byte accessed is taken as I/O-bound: one task per 256 KiB
  accessed, at most ceil(sqrt(cores));
- any other: one task per 100,000 units of FLOPs + 2 x transcendentals + 10 x bytes
  accessed ("100 us of work on a 2 GHz core"), at most one per core.

Only ops whose outputs are independent are split: element-wise ops, loop fusions,
broadcasts, concatenations, slices, gathers, pads, reductions, reshapes, transposes.
Library calls thread themselves (dots and convolutions through YNNPACK, custom fusions
such as XLA:CPU's ``__ynn_fusion``, custom calls). Everything else runs as one task.

Library calls. XLA:CPU hands every ``__ynn_fusion`` its thread pool; YNNPACK runs in
parallel the tiles it splits a matrix product's output into, and only those
(``ynnpack/subgraph/dot.cc``, ``choose_split_factors``, read in google/XNNPACK): a tile
spans all ``n`` columns and starts at 16 rows (fewer if ``m`` has fewer), and doubles its
rows while it holds fewer than min(m, 64) x min(n, 64) outputs, or until (rows + n) x
min(k, 1024) reaches 65,536 or it holds 65,536 outputs. So a product runs on one core when
one tile holds it. Batch loops gave no second core on this project's host, nor did a
convolution's batch and outer output positions (its ``m`` rows, batch x output positions,
come in ``row_blocks`` blocks of one row of positions each, and it tiles within a
block): a 16 x (128 x 64 x 128) batched matmul and four convolutions of 14 to 56
positions a row ran 1.0x on two cores, as did a 64 x 4096 x 64 matmul, while 256-wide and
larger matmuls ran 1.7-2.0x. Other library calls (a custom
call, a YNNPACK reduction, and the plain dots and convolutions XLA:CPU leaves to Eigen,
as it does most convolutions of a training step's backward pass) are taken to use every
core.

Inline programs. The XLA:CPU client runs a program whose FLOPs (XLA's count, without
transcendentals) are under ``INLINE_FLOPS`` on the thread that called it, and hands any
other to a worker thread (``cheap_computation_`` in ``xla/pjrt/cpu/cpu_client.cc``: "less
than the thread context switch time"). An op timed as its own program pays that handoff:
on a process pinned to one core, a context switch on that core (about 3 us here).

Approximations: the task count is not limited by the sizes of the outer dimensions (an
output with fewer rows than tasks gets fewer); bytes accessed are the op's main-memory
bytes as :mod:`roofline.program.hlo.costs` counts them, which follow XLA's cost analysis;
YNNPACK's tile spans all ``n`` columns (its column block, sized to the L2 cache, is taken
as at least ``n``), and the XNNPACK commit jaxlib bundles was not pinned.
"""

from __future__ import annotations

import math

from roofline.program.hlo.formulas import GemmShape
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.rules import OpCategory

INLINE_FLOPS = 1000
L2_BYTES_PER_TASK = 256 << 10
CYCLES_PER_TASK = 100_000

# Opcodes XLA:CPU may split (besides element-wise ones and loop fusions).
_SPLITTABLE = frozenset({
    "broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice", "gather", "iota",
    "pad", "reduce", "reduce-window", "reshape", "reverse", "slice", "transpose"})
_LIBRARY = frozenset({"dot", "convolution", "custom-call", "fft"})


def threads_itself(op: OpCost) -> bool:
    """Whether ``op`` is a library call that spreads its own work over the cores."""
    return op.opcode in _LIBRARY or (op.opcode == "fusion" and op.fusion_kind == "kCustom")


def parallel_tasks(op: OpCost, cores: int) -> int | None:
    """The tasks XLA:CPU splits ``op`` into when compiled for ``cores`` cores (module
    docstring); None for a library call, which threads itself."""
    if cores < 1:
        raise ValueError(f"a host has at least one core, not {cores}")
    if threads_itself(op):
        return None
    splittable = (op.category == OpCategory.ELEMENTWISE or op.opcode in _SPLITTABLE
                  or (op.opcode == "fusion" and op.fusion_kind in ("kLoop", "")))
    if not splittable or op.kernels != 1 or op.body:
        return 1
    accessed = max(op.bytes, 1.0)
    if op.flops / accessed <= 1.0:
        limit = math.ceil(math.sqrt(cores))
        cost, per_task = accessed, L2_BYTES_PER_TASK
    else:
        limit = cores
        cost, per_task = op.flops + 2 * op.transcendentals + 10 * accessed, CYCLES_PER_TASK
    return int(min(limit, max(1, cost // per_task)))


YNN_FIRST_ROWS = 16
YNN_MIN_EDGE = 64
YNN_STOP = 65_536       # (rows + n) x min(k, 1024), or outputs per tile, to stop growing
YNN_K_CAP = 1024


def library_tiles(gemm: GemmShape) -> int:
    """The tiles YNNPACK runs one matrix product's output in, in parallel (docstring)."""
    m = max(gemm.m // max(gemm.row_blocks, 1), 1)
    n, k = max(gemm.n, 1), max(gemm.k, 1)
    rows = min(m, YNN_FIRST_ROWS)

    def grown() -> bool:
        large = rows * n >= min(m, YNN_MIN_EDGE) * min(n, YNN_MIN_EDGE)
        return large and ((rows + n) * min(k, YNN_K_CAP) >= YNN_STOP or rows * n >= YNN_STOP)
    while rows < m and not grown():
        rows = min(2 * rows, m)
    return math.ceil(m / rows)


def occupied_cores(op: OpCost, cores: int) -> int:
    """The cores ``op`` keeps busy on a host of ``cores`` cores: its tasks, at most one per
    core; a YNNPACK fusion as many as the tiles of its matrix product; any other library
    call (a plain dot or convolution runs through Eigen, which splits it over the pool)
    all of them."""
    tasks = parallel_tasks(op, cores)
    if tasks is None:
        gemm = op.gemm if op.fusion_kind == "kCustom" else None
        tasks = cores if gemm is None else library_tiles(gemm)
    return min(tasks, cores)


def runs_inline(op: OpCost) -> bool:
    """Whether ``op``, run as a program of its own, runs on the caller's thread."""
    return op.flops < INLINE_FLOPS
