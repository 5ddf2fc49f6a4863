"""XLA:CPU's parallel task assignment (roofline/program/hlo/cpu_threads.py): hand arithmetic
on the rule, and the rule against the partitions XLA itself writes into compiled ops."""

import json
import math
import os
import re

import jax
import jax.numpy as jnp
import pytest

from roofline.program.compile import compile_program
from roofline.program.hlo.cpu_threads import library_tiles, occupied_cores, parallel_tasks
from roofline.program.hlo.formulas import GemmShape
from roofline.program.hlo.op_cost import OpCost
from tests.programs import sds


def _op(flops: float, nbytes: float, transcendentals: float = 0.0, opcode: str = "fusion",
        kind: str = "kLoop", category: str = "elementwise") -> OpCost:
    return OpCost(name="op", opcode=opcode, category=category, dtype="fp32", unit="vector",
                  flops=flops, transcendentals=transcendentals, bytes_read=nbytes / 2,
                  bytes_written=nbytes / 2, onchip_bytes=0.0, link_bytes=0.0, op_name="",
                  operands=(), fusion_kind=kind if opcode == "fusion" else "")


def test_io_bound_ops_take_one_task_per_256_kib_up_to_the_root_of_the_cores():
    # relu of 2^18 f32: 2^18 FLOPs over 2 MiB accessed (<= 1 FLOP/B): I/O-bound, 2 MiB /
    # 256 KiB = 8 tasks wanted, at most ceil(sqrt(cores)): 2 on 2 cores, 3 on 8, 4 on 16.
    relu = _op(2**18, 2 * 2**20)
    assert [parallel_tasks(relu, n) for n in (1, 2, 8, 16)] == [1, 2, 3, 4]
    # 64 KiB accessed: under one task's 256 KiB, one task.
    assert parallel_tasks(_op(2**13, 2**16), 16) == 1


def test_compute_heavy_ops_take_one_task_per_100k_units_of_cost_up_to_the_cores():
    # 2^14 f32 elements with 9 FLOPs and one tanh each: 147,456 FLOPs over 131,072 bytes
    # accessed (over 1 FLOP/B: not I/O-bound). Cost 147,456 + 2 x 16,384 + 10 x 131,072 =
    # 1,490,944 units: 14 tasks wanted (100,000 units each), at most one per core.
    gelu = _op(9 * 2**14, 2**17, transcendentals=2**14)
    assert [parallel_tasks(gelu, n) for n in (1, 2, 8, 16, 32)] == [1, 2, 8, 14, 14]


def test_library_calls_thread_themselves_and_other_ops_run_as_one_task():
    # A dot and a custom (YNNPACK) fusion: the library decides; without a matrix product
    # to tile, they are taken to occupy every core.
    for library in (_op(1e9, 1e6, opcode="dot", category="matmul"),
                    _op(1e9, 1e6, kind="kCustom", category="matmul")):
        assert parallel_tasks(library, 4) is None
        assert occupied_cores(library, 4) == 4
    # A sort is not split whatever its size.
    assert parallel_tasks(_op(1e9, 1e9, opcode="sort", category="reduction"), 4) == 1
    assert occupied_cores(_op(2**18, 2 * 2**20), 4) == 2


@pytest.mark.parametrize(("gemm", "tiles"), [
    # 256^3: 16-row tiles of all 256 columns hold 4096 >= 64 x 64 outputs, and (16 + 256) x
    # 256 = 69,632 >= 65,536: grown. 256 / 16 = 16 tiles.
    (GemmShape(1, 256, 256, 256), 16),
    # 128^3: 16 rows hold 2048 < 4096: 32 rows (4096); (32 + 128) x 128 = 20,480 and 4096
    # outputs are short of 65,536: 64, then 128 rows, all of m. One tile.
    (GemmShape(1, 128, 128, 128), 1),
    # 64 x 4096 x 64: 16 x 64 = 1024 < 4096 outputs: 32, then 64 rows, all of m: one tile.
    (GemmShape(1, 64, 64, 4096), 1),
    # A batched 16 x (128 x 64 x 128): batches are not tiles; (32 + 128) x 64 = 10,240 keeps
    # the tile growing to all 128 rows: one tile.
    (GemmShape(16, 128, 128, 64), 1),
    # A convolution of 8 x 32 x 32 positions, 32 -> 32 channels 3 x 3: rows in 8 x 32 = 256
    # blocks of 32; 16 x 32 = 512 < 32 x 32 outputs: 32 rows, one tile.
    (GemmShape(1, 8192, 32, 288, row_blocks=256), 1),
    # linear 4096 x 768 by 768 x 3072: 16 rows x 3072 = 49,152 >= 4096 outputs and (16 +
    # 3072) x 768 >= 65,536: grown at 16 rows. 4096 / 16 = 256 tiles.
    (GemmShape(1, 4096, 3072, 768), 256),
])
def test_ynnpack_runs_the_tiles_of_a_matrix_product_in_parallel(gemm, tiles):
    import dataclasses

    assert library_tiles(gemm) == tiles
    ynn = dataclasses.replace(_op(1e9, 1e6, kind="kCustom", category="matmul"), gemm=gemm)
    assert occupied_cores(ynn, 2) == min(tiles, 2)
    # The same product as a plain dot runs through Eigen, which splits it over the pool.
    eigen = dataclasses.replace(_op(1e9, 1e6, opcode="dot", category="matmul"), gemm=gemm)
    assert occupied_cores(eigen, 2) == 2


def _partitions(hlo_text: str, name: str) -> int:
    line = next(line for line in hlo_text.splitlines() if f"%{name} = " in line)
    match = re.search(r"backend_config=(\{.*\})", line)
    config = json.loads(match.group(1)) if match else {}
    return math.prod(int(p) for p in config.get("outer_dimension_partitions", [])) or 1


PROGRAMS = {
    "relu 2^14": (jax.nn.relu, (sds((2**14,)),)),
    "relu 2^18": (jax.nn.relu, (sds((2**18,)),)),
    "exp 2^16": (jnp.exp, (sds((2**16,)),)),
    "exp 2^20": (jnp.exp, (sds((2**20,)),)),
    "gelu 2^12": (lambda x: jax.nn.gelu(x, approximate=True), (sds((2**12,)),)),
    "gelu 2^16": (lambda x: jax.nn.gelu(x, approximate=True), (sds((2**16,)),)),
    "add 256x4096": (lambda a, b: a + b, (sds((256, 4096)), sds((4096,)))),
    "matmul": (lambda a, b: a @ b, (sds((256, 256)), sds((256, 256)))),
}


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_the_rule_gives_the_partitions_xla_writes_into_the_compiled_ops(program):
    # XLA:CPU compiled in this process may use the cores this process may run on; its
    # partitions are in each op's backend_config (none written: one task). A library call
    # has none written, and the rule says it threads itself.
    fn, args = PROGRAMS[program]
    compiled = compile_program(fn, args)
    cores = len(os.sched_getaffinity(0))
    working = [op for op in compiled.costs.ops if op.does_work]
    assert working
    for op in working:
        expected = _partitions(compiled.hlo_text, op.name)
        tasks = parallel_tasks(op, cores)
        assert (tasks or 1) == expected, (op.name, op.flops, op.bytes, op.transcendentals)


def test_the_measured_vector_chains_count_their_flops_as_xla_does():
    # `hardware measure` rates a chain of multiply-adds at CHAIN_STEP_FLOPS per step; the
    # rate is a roof only if that is what the registry counts for the compiled chain (a
    # bf16 step: multiply, add, and a convert to bf16 and back after each: 6 FLOPs).
    from roofline.hardware.host_kernels import CHAIN_STEP_FLOPS

    def chain(x, a, b):
        for _ in range(8):
            x = x * a + b
        return x
    for name, per_step in CHAIN_STEP_FLOPS.items():
        dtype = getattr(jnp, name)
        program = compile_program(chain, (sds((4096,), dtype), jnp.asarray(1.0001, dtype),
                                          jnp.asarray(0.5, dtype)))
        flops = sum(op.flops for op in program.costs.ops)
        assert flops == pytest.approx(per_step * 8 * 4096, rel=0.01), name

