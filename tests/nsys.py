"""An Nsight Systems SQLite export, written by the tests from the schema NVIDIA documents
(Nsight Systems User Guide, "SQLite Export Schema Reference", export schema 3.x of nsys
2024): the tables and columns the reader uses, with the values nsys writes.

Two processes of a data-parallel run, three steps each (NVTX ``train_step`` ranges):
process 100 sees its GPU as CUDA device 0 and it is GPU 1; process 200 sees its GPU as
CUDA device 0 too, and it is GPU 0 (``CUDA_VISIBLE_DEVICES`` per rank). Per step:

- process 100 (GPU 1): stream 7 runs the GEMM twice (100 us each), GELU once (20 us) and
  a memset of 1,000,000 bytes (2 us); stream 13 runs an NCCL all-reduce (50 us); stream
  14 a host-to-device copy of 4,000,000 bytes (100 us).
- process 200 (GPU 0): stream 7 runs the GEMM once (100 us), GELU once (20 us) and a
  device-to-host copy of 2,000,000 bytes (100 us).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

GEMM = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)"
GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl"
        "(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}>(int, float*)")
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
STRINGS = {1: GEMM, 2: GELU, 3: ALLREDUCE, 4: "train_step", 5: "forward",
           11: "Kernel", 12: "vectorized_elementwise_kernel", 13: "ncclDevKernel_AllReduce"}
SHORT = {1: 11, 2: 12, 3: 13}
STEPS = 3
STEP_NS = 1_000_000
PIDS = {100: 1, 200: 0}                 # process: its GPU (TARGET_INFO_GPU id)
# process: [(stream, name id, duration ns)] per step, in order
KERNELS = {100: [(7, 1, 100_000), (7, 1, 100_000), (7, 2, 20_000), (13, 3, 50_000)],
           200: [(7, 1, 100_000), (7, 2, 20_000)]}
# process: [(stream, copyKind, bytes, duration ns)] per step
MEMCPYS = {100: [(14, 1, 4_000_000, 100_000)], 200: [(7, 2, 2_000_000, 100_000)]}
MEMSETS = {100: [(7, 1_000_000, 2_000)], 200: []}

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT,
    busLocation TEXT, totalMemory INTEGER, smCount INTEGER, cuDevice INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
    shortName INTEGER NOT NULL, mangledName INTEGER, registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL,
    copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL,
    bytes INTEGER NOT NULL, memKind INTEGER);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (0, 'CUDA_MEMCPY_KIND_UNKNOWN', 'Unknown'),
    (1, 'CUDA_MEMCPY_KIND_HTOD', 'Host-to-Device'), (2, 'CUDA_MEMCPY_KIND_DTOH',
    'Device-to-Host'), (8, 'CUDA_MEMCPY_KIND_DTOD', 'Device-to-Device');
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (34, 'NvtxMark', 'NvtxMark'),
    (59, 'NvtxPushPopRange', 'NvtxPushPopRange'),
    (60, 'NvtxStartEndRange', 'NvtxStartEndRange');
"""
# nsys 2024: registered NVTX strings by textId, and the CUDA device of each process.
NEW_TABLES = """
CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER NOT NULL,
    pid INTEGER NOT NULL, uuid TEXT, numMultiprocessors INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, textId INTEGER, domainId INTEGER);
"""
# Before textId (nsys 2020): every NVTX name in text, no TARGET_INFO_CUDA_DEVICE.
OLD_TABLES = """
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
    rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
    endGlobalTid INTEGER, domainId INTEGER);
"""


def _global_id(pid: int, tid: int = 0) -> int:
    return (pid << 24) | tid           # a serialized GlobalId: process in bits 24 to 47


def nsys_export(path: Path, *, old_schema: bool = False) -> Path:
    """Write the export described above to ``path`` (as the schema of nsys 2024, or of a
    version before NVTX's ``textId`` and ``TARGET_INFO_CUDA_DEVICE``)."""
    db = sqlite3.connect(path)
    db.executescript(SCHEMA + (OLD_TABLES if old_schema else NEW_TABLES))
    db.executemany("INSERT INTO StringIds VALUES (?, ?)", STRINGS.items())
    db.executemany("INSERT INTO TARGET_INFO_GPU VALUES (0, ?, 'NVIDIA H100 80GB HBM3', ?, "
                   "85022425088, 132, ?)",
                   [(gpu, f"0000:{gpu + 1:02x}:00.0", gpu) for gpu in sorted(PIDS.values())])
    if not old_schema:
        db.executemany("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, 0, ?, NULL, 132)",
                       [(gpu, pid) for pid, gpu in PIDS.items()])
    for pid in PIDS:
        thread = _global_id(pid, pid + 1)
        for step in range(STEPS):
            base = STEP_NS * (step + 1)
            _step_range(db, thread, base, old_schema)
            clock = base + 10_000
            for stream, name, duration in KERNELS[pid]:
                db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, ?, "
                           "0, ?, ?, ?, NULL, 32, 108, 1, 1, 256, 1, 1)",
                           (clock, clock + duration, stream, _global_id(pid), name,
                            SHORT[name]))
                clock += duration + 1_000
            for stream, kind, moved, duration in MEMCPYS[pid]:
                db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, ?, 0, "
                           "?, ?, ?, 0, 2)", (clock, clock + duration, stream,
                                              _global_id(pid), moved, kind))
                clock += duration + 1_000
            for stream, moved, duration in MEMSETS[pid]:
                db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?, ?, 0, 1, ?, 0, "
                           "?, 0, ?, 2)", (clock, clock + duration, stream, _global_id(pid),
                                           moved))
    # a warm-up before the steps, as a start/end range with an unregistered string
    db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES "
               "(0, 900000, 60, 'warmup step 0', ?)", (_global_id(100, 101),))
    db.commit()
    db.close()
    return path


def _step_range(db: sqlite3.Connection, thread: int, base: int, old_schema: bool) -> None:
    """One step's ``train_step`` push/pop range and the two ``forward`` ranges in it."""
    ranges = [(base, base + STEP_NS - 100_000, 4), (base + 1_000, base + 200_000, 5),
              (base + 300_000, base + 500_000, 5)]
    for start, end, string in ranges:
        if old_schema:
            db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) "
                       "VALUES (?, ?, 59, ?, ?)", (start, end, STRINGS[string], thread))
        else:
            db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, textId, globalTid) "
                       "VALUES (?, ?, 59, ?, ?)", (start, end, string, thread))
