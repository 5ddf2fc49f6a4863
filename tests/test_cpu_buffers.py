"""Which outputs XLA:CPU allocates fresh on every call (glibc's 32 MiB mmap ceiling)."""

from roofline.program.hlo.cpu_buffers import fresh_pages
from roofline.program.hlo.op_cost import OpCost


def _op(bytes_written: float) -> OpCost:
    return OpCost(name="op", opcode="fusion", category="elementwise", dtype="fp32",
                  unit="vector", flops=0.0, transcendentals=0.0, bytes_read=bytes_written,
                  bytes_written=bytes_written, onchip_bytes=0.0, link_bytes=0.0,
                  op_name="op", operands=())


def test_outputs_of_32_mib_or_more_are_fresh_pages_and_smaller_ones_are_not():
    # 32 MiB = 33554432 bytes = 8192 pages of 4096; a byte more starts page 8193.
    assert fresh_pages(_op(32 << 20)) == 8192
    assert fresh_pages(_op((32 << 20) + 1)) == 8193
    # Just under the ceiling: served by freed heap memory, taken as warm.
    assert fresh_pages(_op((32 << 20) - 4)) == 0
