"""Published per-kernel tables (Baidu DeepBench's, ``measurements/deepbench/``) read as the
kernels a kernel model is learned from and checked on.

Each GEMM row is a library GEMM (a cuBLAS or rocBLAS call: ``2 m n k`` FLOPs, its two
operands read and its output written at the precision's element sizes, ``GemmShape(1, m,
n, k)`` with its first operand's transposition kept); each convolution row is up to three
kernels, one per pass timed (forward, gradient of the input, gradient of the filter), each
of its pass's class with the implicit GEMM of that pass, built from the convolution as
XLA describes one (:meth:`ConvolutionSpec.implicit_gemm`: its FLOPs count the (output,
tap) pairs that land on the input, as XLA's cost analysis counts them; the kernel model
times every tap the implicit GEMM multiplies, :attr:`GemmShape.flops`). An RNN layer is
the kernels it runs (:class:`RnnLayer`): the recurrent GEMM and the gates' element-wise
kernel each timestep, or one GEMM of every timestep for the weights' gradient. An
all-reduce row (one node's GPUs) is a collective of ``n`` ranks over each GPU's first
link, a ring's link bytes and hops (:class:`LinkPattern`); rows across nodes are left out
(their bytes cross InfiniBand FDR, a fabric no GPU spec states).

Precisions: ``fp32`` multiplies in fp32; ``fp16-mixed`` in fp16 on tensor cores (V100,
T4), the convolutions' input channels padded to a multiple of 8 as the benchmark pads
them for tensor cores; ``fp16-pseudo`` (P100) stores fp16 and multiplies in fp32 (other
kernels than fp32's, learned apart: :func:`roofline.model.kernel_model.params_key`);
``int8`` (inference) multiplies int8 into 32-bit sums, where the sheet marks a kernel
padded its dimensions (a GEMM's m, n, k; a convolution's channels) to multiples of 4. A
row is kept only where its device has a spec (:mod:`roofline.hardware.deepbench_names`)
with a rate for the dtype it multiplies in; the rows left out are counted by reason.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from roofline.errors import KernelModelError
from roofline.hardware.deepbench_names import spec_for_deepbench
from roofline.hardware.library import load_hardware
from roofline.hardware.records import ExecutionUnit, Hardware
from roofline.input_files import KERNEL_TABLE, read_input_text
from roofline.model.kernel_fit import MeasuredKernel
from roofline.model.kernel_model import KernelClass, flop_per_cycle
from roofline.program.hlo.formulas import ConvolutionSpec
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.rules import LinkPattern, OpCategory
from roofline.program.hlo.shapes import ArrayShape

GEMM_FILE = "gemm.csv"
CONV_FILE = "conv.csv"
RNN_FILE = "rnn.csv"
ALLREDUCE_FILE = "allreduce.csv"
DEVICES_FILE = "devices.csv"
TABLES = (GEMM_FILE, CONV_FILE, RNN_FILE, ALLREDUCE_FILE)


@dataclass(frozen=True)
class Precision:
    """How a table's precision runs: the dtype it multiplies in, the bytes of an operand
    element and of an output element, and the multiple its dimensions are padded to."""

    dtype: str
    operand_bytes: float
    output_bytes: float
    storage: str         # the dtype its operands are stored in


PRECISIONS = {
    "fp32": Precision("fp32", 4, 4, "fp32"),
    "fp16-mixed": Precision("fp16", 2, 2, "fp16"),
    "fp16-pseudo": Precision("fp32", 2, 2, "fp16"),
    "int8": Precision("int8", 1, 4, "int8"),
}
# DeepBench's README: convolutions on tensor cores "need input and output channels to be
# a multiple of 8. The benchmarks currently pad the input channels to be a multiple of 8
# and report padded numbers."
TENSOR_CORE_CHANNELS = 8
# Its README for int8 on NVIDIA GPUs: "Input sizes have to be a multiple of 4 ... We have
# padded inputs dimensions to be multiples of 4"; the sheets mark the kernels padded.
INT8_MULTIPLE = 4
# The gates of each cell, whose pre-activations one GEMM of the hidden state computes.
GATES = {"vanilla": 1, "lstm": 4, "gru": 3}


# The timed passes of a convolution or RNN layer, as the tables' columns name them.
FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHTS = "fwd", "bwd_input", "bwd_weights"
_CONV_CLASSES = {FORWARD: KernelClass.CONV_FPROP, BACKWARD_INPUT: KernelClass.CONV_DGRAD,
                 BACKWARD_WEIGHTS: KernelClass.CONV_WGRAD}
# Each convolution pass's implicit GEMM: the tensor ConvolutionSpec.implicit_gemm names
# it by (the one it produces).
_IMPLICIT_GEMM = {FORWARD: "output", BACKWARD_INPUT: "input", BACKWARD_WEIGHTS: "kernel"}


@dataclass(frozen=True)
class TableKernel:
    """One timed kernel of a table: the GPU (its spec id and the table's name for it), the
    precision, the row (``gemm.csv:12``) and the kernel as the fit reads it."""

    device: str
    table_device: str
    precision: str
    where: str
    kernel: MeasuredKernel

    @property
    def kind(self) -> KernelClass:
        return self.kernel.kind

    @property
    def dtype(self) -> str:
        return self.kernel.op.dtype


@dataclass(frozen=True)
class LayerKernel:
    """A kernel an RNN layer runs, its class, and how many times one pass runs it."""

    op: OpCost
    kind: KernelClass
    count: int


@dataclass(frozen=True)
class RnnLayer:
    """One timed pass of a recurrent layer (``rnn.csv``) as the kernels it runs."""

    device: str
    table_device: str
    precision: str
    where: str
    cell: str
    timed: str           # fwd, bwd_input or bwd_weights
    seconds: float
    kernels: tuple[LayerKernel, ...]


@dataclass(frozen=True)
class Libraries:
    """The libraries a GPU's training workbook ran (``devices.csv``): the BLAS and DNN
    library versions as published, and the toolkit's (CUDA's or ROCm's) version number,
    which orders them."""

    toolkit: str          # "CUDA" or "ROCm"
    version: str          # as published: "8.0.88", "10.1.243", "1.7.1"
    dnn: str              # "cuDNN 6.0.21", "MIOpen 1.3"

    @property
    def number(self) -> float:
        """The toolkit's major.minor as a number (8.0 for "8.0.88", 8.0 for "8")."""
        parts = re.findall(r"\d+", self.version)
        return float(f"{parts[0]}.{parts[1] if len(parts) > 1 else 0}") if parts else 0.0

    def text(self) -> str:
        return f"{self.toolkit} {self.version}, {self.dnn}"


@dataclass(frozen=True)
class KernelTables:
    """What a folder of tables gives: its kernels, its RNN layers, each GPU's libraries
    (by spec id) and the rows left out, by reason."""

    path: Path
    kernels: tuple[TableKernel, ...]
    layers: tuple[RnnLayer, ...]
    libraries: Mapping[str, Libraries]
    left_out: Mapping[str, int]

    def devices(self) -> list[str]:
        """The spec ids of the GPUs with kernels, in the order of the tables."""
        return list(dict.fromkeys(k.device for k in self.kernels))

    def of(self, device: str) -> tuple[list[TableKernel], list[RnnLayer]]:
        return ([k for k in self.kernels if k.device == device],
                [layer for layer in self.layers if layer.device == device])


class _Rows:
    """A table's rows with checked reads, each error naming the file, the line and the
    column."""

    def __init__(self, path: Path, required: Sequence[str]):
        self.path = path
        reader = csv.DictReader(io.StringIO(read_input_text(path, KERNEL_TABLE)))
        header = reader.fieldnames or []
        missing = [name for name in required if name not in header]
        if missing:
            raise KernelModelError(f"{path}: line 1 has no column '{missing[0]}' (its "
                                   f"columns: {', '.join(header) or 'none'}); "
                                   f"{KERNEL_TABLE.fix}")
        self._reader = reader
        self.line = 1

    def __iter__(self) -> Iterator[dict[str, str]]:
        for row in self._reader:
            self.line = self._reader.line_num
            if None in row or any(value is None for value in row.values()):
                raise KernelModelError(f"{self.path}: line {self.line} has "
                                       f"{'more' if None in row else 'fewer'} cells than "
                                       f"its header; {KERNEL_TABLE.fix}")
            yield row

    def fail(self, column: str, problem: str) -> KernelModelError:
        return KernelModelError(f"{self.path}: line {self.line}, column '{column}' "
                                f"{problem}; {KERNEL_TABLE.fix}")

    def whole(self, row: Mapping[str, str], column: str, low: int = 1) -> int:
        text = row[column].strip()
        if not re.fullmatch(r"\d+", text) or int(text) < low:
            raise self.fail(column, f"is {text!r}, not a whole number of at least {low}")
        return int(text)

    def time(self, row: Mapping[str, str], column: str) -> float | None:
        """A time in ms as seconds; None where the cell is empty (not timed)."""
        text = row[column].strip()
        if not text:
            return None
        try:
            value = float(text)
        except ValueError:
            raise self.fail(column, f"is {text!r}, not a time in ms") from None
        if not math.isfinite(value) or value <= 0:
            raise self.fail(column, f"is {text!r}: a time must be finite and above zero")
        return value * 1e-3

    def choice(self, row: Mapping[str, str], column: str, allowed: Sequence[str]) -> str:
        text = row[column].strip()
        if text not in allowed:
            raise self.fail(column, f"is {text!r}, not one of {', '.join(allowed)}")
        return text

    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def _padded(size: int, multiple: int) -> int:
    return -(-size // multiple) * multiple


class _Devices:
    """The spec of each table device, loaded once, and the rows left out by reason."""

    def __init__(self, hardware_dirs: Sequence[str | Path]):
        self._dirs = hardware_dirs
        self._specs: dict[str, Hardware | None] = {}
        self.left_out: Counter[str] = Counter()

    def spec(self, table_device: str) -> Hardware | None:
        if table_device not in self._specs:
            spec_id = spec_for_deepbench(table_device)
            self._specs[table_device] = (None if spec_id is None
                                         else load_hardware(spec_id, self._dirs))
        return self._specs[table_device]

    def kept(self, rows: _Rows, row: Mapping[str, str]) -> tuple[Hardware, Precision] | None:
        """The row's GPU and precision, or None (counted) where it is left out."""
        hardware = self.spec(row["device"])
        if hardware is None:
            self.left_out[f"{row['device']}: no GPU spec describes it"] += 1
            return None
        precision = PRECISIONS[rows.choice(row, "precision", list(PRECISIONS))]
        if precision.dtype not in flop_per_cycle(hardware):
            self.left_out[f"{hardware.id} {row['precision']}: its spec has no "
                          f"{precision.dtype} rate"] += 1
            return None
        return hardware, precision


def _op(name: str, category: OpCategory, unit: ExecutionUnit, precision: Precision,
        flops: float, read: float, written: float, **extra: object) -> OpCost:
    return OpCost(name, "custom-call" if category is not OpCategory.ELEMENTWISE else "fusion",
                  category, precision.dtype, unit, flops, 0.0, read, written, 0.0, 0.0,
                  name, (), written_dtype=precision.storage, platform="gpu",
                  full_fp32=precision.dtype == "fp32", **extra)  # type: ignore[arg-type]


def gemm_op(name: str, m: int, n: int, k: int, transposed: bool, precision: Precision
            ) -> OpCost:
    """A library GEMM ``C (m x n) = op(A) (m x k) op(B) (k x n)``: ``2 m n k`` FLOPs, A and
    B read, C written."""
    from roofline.program.hlo.formulas import GemmShape

    return _op(name, OpCategory.MATMUL, ExecutionUnit.MATRIX, precision, 2.0 * m * n * k,
               precision.operand_bytes * (m * k + k * n), precision.output_bytes * m * n,
               gemm=GemmShape(1, m, n, k, transposed=transposed),
               custom_call_target="__cublas$gemm")


def read_gemms(path: Path, devices: _Devices) -> Iterator[TableKernel]:
    rows = _Rows(path, ("device", "precision", "m", "n", "k", "a_transpose", "b_transpose",
                        "time_ms", "padded"))
    for row in rows:
        kept = devices.kept(rows, row)
        m, n, k = (rows.whole(row, column) for column in ("m", "n", "k"))
        transposed = rows.choice(row, "a_transpose", ("N", "T")) == "T"
        rows.choice(row, "b_transpose", ("N", "T"))
        seconds = rows.time(row, "time_ms")
        if kept is None or seconds is None:
            continue
        hardware, precision = kept
        if precision.dtype == "int8" and row["padded"].strip() in ("1", "1.0"):
            m, n, k = (_padded(size, INT8_MULTIPLE) for size in (m, n, k))
        op = gemm_op(f"gemm {m}x{n}x{k} {row['a_transpose']}{row['b_transpose']} "
                     f"{row['precision']}", m, n, k, transposed, precision)
        yield TableKernel(hardware.id, row["device"], row["precision"], rows.where(),
                          MeasuredKernel(rows.where(), op, KernelClass.LIBRARY_GEMM, seconds,
                                         1.0))


def convolution(n: int, c: int, h: int, w: int, k: int, r: int, s: int, pad_h: int,
                pad_w: int, stride_h: int, stride_w: int) -> ConvolutionSpec:
    """The forward convolution of an ``n x c x h x w`` input and ``k`` filters of ``c x r x
    s`` (NCHW), as XLA describes one: output ``1 + (h - r + 2 pad_h) // stride_h`` by
    ``1 + (w - s + 2 pad_w) // stride_w``."""
    p = 1 + (h - r + 2 * pad_h) // stride_h
    q = 1 + (w - s + 2 * pad_w) // stride_w
    return ConvolutionSpec.from_shapes(
        ArrayShape("f32", (n, c, h, w)), ArrayShape("f32", (k, c, r, s)),
        ArrayShape("f32", (n, k, p, q)),
        {"dim_labels": "bf01_oi01->bf01",
         "window": f"{{size={r}x{s} stride={stride_h}x{stride_w} "
                   f"pad={pad_h}_{pad_h}x{pad_w}_{pad_w}}}"})


def convolution_op(name: str, spec: ConvolutionSpec, timed: str, precision: Precision
                   ) -> OpCost:
    """One pass of ``spec`` as the kernel its library runs: the implicit GEMM of that pass,
    the direct algorithm's FLOPs, and the two tensors it reads and the one it writes."""
    image = spec.batch * spec.in_features * math.prod(spec.input_spatial)
    filters = spec.out_features * spec.in_features * math.prod(spec.kernel_spatial)
    result = spec.batch * spec.out_features * math.prod(spec.output_spatial)
    read, written = {FORWARD: (image + filters, result),
                     BACKWARD_INPUT: (result + filters, image),
                     BACKWARD_WEIGHTS: (image + result, filters)}[timed]
    return _op(name, OpCategory.CONVOLUTION, ExecutionUnit.MATRIX, precision,
               2.0 * spec.fma_count, precision.operand_bytes * read,
               precision.output_bytes * written, gemm=spec.implicit_gemm(_IMPLICIT_GEMM[timed]))


def read_convolutions(path: Path, devices: _Devices) -> Iterator[TableKernel]:
    sizes = ("w", "h", "c", "n", "k", "filter_w", "filter_h", "pad_w", "pad_h", "stride_w",
             "stride_h")
    rows = _Rows(path, ("device", "precision", *sizes, "fwd_ms", "bwd_input_ms",
                        "bwd_weights_ms", "padded"))
    for row in rows:
        kept = devices.kept(rows, row)
        shape = {column: rows.whole(row, column, 0 if column.startswith("pad") else 1)
                 for column in sizes}
        times = {timed: rows.time(row, f"{timed}_ms")
                 for timed in (FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHTS)}
        if kept is None:
            continue
        hardware, precision = kept
        channels = shape["c"]
        if precision.dtype == "fp16" and hardware.has_roof("fp16", ExecutionUnit.MATRIX):
            channels = _padded(channels, TENSOR_CORE_CHANNELS)
        if precision.dtype == "int8" and row["padded"].strip() in ("1", "1.0"):
            channels = _padded(channels, INT8_MULTIPLE)
        spec = convolution(shape["n"], channels, shape["h"], shape["w"], shape["k"],
                           shape["filter_h"], shape["filter_w"], shape["pad_h"],
                           shape["pad_w"], shape["stride_h"], shape["stride_w"])
        label = (f"conv {shape['w']}x{shape['h']}x{shape['c']} n{shape['n']} k{shape['k']} "
                 f"{shape['filter_w']}x{shape['filter_h']} /{shape['stride_w']} "
                 f"{row['precision']}")
        for timed, seconds in times.items():
            if seconds is None:
                continue
            op = convolution_op(f"{label} {timed}", spec, timed, precision)
            yield TableKernel(hardware.id, row["device"], row["precision"], rows.where(),
                              MeasuredKernel(rows.where(), op, _CONV_CLASSES[timed], seconds,
                                             1.0))


def rnn_kernels(cell: str, hidden: int, batch: int, steps: int, timed: str,
                precision: Precision, training: bool) -> tuple[LayerKernel, ...]:
    """The kernels one pass of a layer runs: with DeepBench's input projection skipped
    (cuDNN's CUDNN_SKIP_INPUT), each timestep of the forward pass a GEMM of the hidden
    state by the recurrent weights (``batch x gates*hidden x hidden``) and one element-wise
    kernel of the gates (reading their pre-activations, the step's input and an LSTM's
    cell; writing the hidden state, an LSTM's cell and, when training, the activations the
    backward pass reads); each step of the input's gradient the transposed GEMM
    (``batch x hidden x gates*hidden``) and the gates' gradient kernel; the weights'
    gradient one GEMM over every timestep (``gates*hidden x hidden x batch*steps``)."""
    gates = GATES[cell]
    state = batch * hidden
    cells = state if cell == "lstm" else 0
    if timed == BACKWARD_WEIGHTS:
        return (LayerKernel(gemm_op(f"{cell} weights' gradient", gates * hidden, hidden,
                                    batch * steps, False, precision),
                            KernelClass.LIBRARY_GEMM, 1),)
    if timed == FORWARD:
        gemm = gemm_op(f"{cell} recurrent GEMM", batch, gates * hidden, hidden, False,
                       precision)
        read = gates * state + state + cells
        written = state + cells + (gates * state if training else 0)
    else:
        gemm = gemm_op(f"{cell} recurrent GEMM's gradient", batch, hidden, gates * hidden,
                       False, precision)
        read = 2 * state + gates * state + cells
        written = gates * state + cells + state
    size = precision.operand_bytes
    gates_op = _op(f"{cell} gates", OpCategory.ELEMENTWISE, ExecutionUnit.VECTOR, precision,
                   float(gates * state), size * read, size * written, fusion_kind="kLoop")
    return (LayerKernel(gemm, KernelClass.LIBRARY_GEMM, steps),
            LayerKernel(gates_op, KernelClass.ELEMENTWISE, steps))


def read_rnn_layers(path: Path, devices: _Devices) -> Iterator[RnnLayer]:
    rows = _Rows(path, ("device", "precision", "cell", "hidden", "batch", "timesteps",
                        "fwd_ms", "bwd_input_ms", "bwd_weights_ms", "bwd_ms", "suite"))
    for row in rows:
        kept = devices.kept(rows, row)
        cell = rows.choice(row, "cell", list(GATES))
        hidden, batch, steps = (rows.whole(row, c) for c in ("hidden", "batch", "timesteps"))
        # A single backward column (the AMD sheets and P100's fp16 one) times the input's
        # gradient: the benchmarks that wrote them call the backward-data function only.
        times = {FORWARD: rows.time(row, "fwd_ms"),
                 BACKWARD_INPUT: rows.time(row, "bwd_input_ms") or rows.time(row, "bwd_ms"),
                 BACKWARD_WEIGHTS: rows.time(row, "bwd_weights_ms")}
        if kept is None:
            continue
        hardware, precision = kept
        training = rows.choice(row, "suite", ("train", "inference")) == "train"
        for timed, seconds in times.items():
            if seconds is not None:
                yield RnnLayer(hardware.id, row["device"], row["precision"], rows.where(),
                               cell, timed, seconds,
                               rnn_kernels(cell, hidden, batch, steps, timed, precision,
                                           training))


def allreduce_op(floats: int, ranks: int) -> OpCost:
    """An all-reduce of ``floats`` fp32 elements over ``ranks`` GPUs, as NCCL's ring runs
    it: the buffer read and written, 2 (n - 1) / n of it sent over the link in 2 (n - 1)
    hops."""
    size = 4.0 * floats
    return OpCost(f"all-reduce {floats} floats x {ranks}", "all-reduce",
                  OpCategory.COLLECTIVE, "fp32", ExecutionUnit.VECTOR, 0.0, 0.0, size, size,
                  0.0, LinkPattern.ALL_REDUCE.factor(ranks) * size, "", (), platform="gpu",
                  link_hops=LinkPattern.ALL_REDUCE.hops(ranks))


def read_allreduces(path: Path, devices: _Devices) -> Iterator[TableKernel]:
    """The all-reduce rows of one node's GPUs (module docstring)."""
    rows = _Rows(path, ("device", "floats", "gpus", "nodes", "mean_ms"))
    for row in rows:
        floats, ranks = rows.whole(row, "floats"), rows.whole(row, "gpus", low=2)
        seconds = rows.time(row, "mean_ms")
        hardware = devices.spec(row["device"])
        if hardware is None:
            devices.left_out[f"{row['device']}: no GPU spec describes it"] += 1
            continue
        if row["nodes"].strip() and rows.whole(row, "nodes") > 1:
            devices.left_out[f"{hardware.id} all-reduce across nodes: InfiniBand FDR, a "
                             "fabric no GPU spec states"] += 1
            continue
        if seconds is None:
            continue
        op = allreduce_op(floats, ranks)
        yield TableKernel(hardware.id, row["device"], "fp32", rows.where(),
                          MeasuredKernel(str(path), op, KernelClass.COLLECTIVE, seconds, 1.0))


def read_libraries(path: Path, devices: _Devices) -> dict[str, Libraries]:
    """Each GPU's libraries, from its training workbook's row of ``devices.csv``."""
    rows = _Rows(path, ("device", "suite", "cuda_version", "cudnn_version", "rocm_version",
                        "miopen_version"))
    found = {}
    for row in rows:
        if row["suite"] != "train" or spec_for_deepbench(row["device"]) is None:
            continue
        hardware = devices.spec(row["device"])
        if hardware is None:
            continue
        if row["cuda_version"].strip():
            found[hardware.id] = Libraries("CUDA", row["cuda_version"].strip(),
                                           f"cuDNN {row['cudnn_version'].strip()}")
        elif row["rocm_version"].strip():
            found[hardware.id] = Libraries("ROCm", row["rocm_version"].strip(),
                                           f"MIOpen {row['miopen_version'].strip()}")
        else:
            raise rows.fail("cuda_version", "and 'rocm_version' are both empty: a GPU's "
                            "libraries are what its kernels ran")
    return found


def read_tables(path: str | Path, hardware_dirs: Sequence[str | Path] = ()) -> KernelTables:
    """The kernels, RNN layers and libraries of the tables in the folder ``path``
    (``gemm.csv``, ``conv.csv``, ``rnn.csv``, ``allreduce.csv``, ``devices.csv``);
    :class:`KernelModelError` naming the file, the line and the column where a row is
    none."""
    path = Path(path)
    devices = _Devices(hardware_dirs)
    kernels = (*read_gemms(path / GEMM_FILE, devices),
               *read_convolutions(path / CONV_FILE, devices),
               *read_allreduces(path / ALLREDUCE_FILE, devices))
    layers = tuple(read_rnn_layers(path / RNN_FILE, devices))
    libraries = read_libraries(path / DEVICES_FILE, devices)
    for device in dict.fromkeys(k.device for k in kernels):
        if device not in libraries:
            raise KernelModelError(f"{path / DEVICES_FILE}: no training workbook's row for "
                                   f"{device}, whose kernels the tables time; "
                                   f"{KERNEL_TABLE.fix}")
    return KernelTables(path, kernels, layers, libraries, dict(devices.left_out))
