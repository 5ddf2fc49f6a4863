"""Flash attention: the marker its stand-in program carries, and the kernel's cost.

Training runs compute attention with fused kernels (Pallas splash kernels on TPU, cuDNN
fused attention on GPU) that a deviceless compile cannot run.
:func:`roofline.program.workloads.flash_attention.flash_attention` computes the same thing
as blocked XLA loops, and traces each pass (forward, backward) inside a
``jax.named_scope`` whose name is a marker: :meth:`FlashPass.marker`, for example
``flash_attention_fwd{b=2,sq=1024,skv=1024,kvh=8,g=4,d=128,causal=1,bq=512,bkv=512,
dtype=bf16}``, the shapes one device sees. JAX keeps the scope in every op's ``op_name``
(``jit(step)/jvp(flash_attention_fwd{...})/while``), and this module owns the format: it
writes the marker and reads it back.

The cost model replaces the stand-in's loops by the kernel they stand for
(:func:`flash_work`, FlashAttention-2's blocked algorithm: Dao 2023, "FlashAttention-2",
Algorithms 1 and 2). In each computation that runs ops in sequence (the entry, a layer
scan's body), every outermost ``while`` that carries a pass's marker and multiplies
matrices is one call of the pass's kernel, and is not descended into. The pass's other
marked ops are parts of it and cost nothing: the carries' initial values, the backward's
``D = rowsum(dO * O)``, layout copies, and the pieces JAX's partial evaluation splits off
a pass under ``jax.grad`` and ``jax.checkpoint`` (loops that stack the key blocks ahead,
zeros and index arrays hoisted out of a layer scan, with the marker but without the
``jvp(...)`` of the pass's own ops). XLA strips the metadata of some ops it makes or
merges (zeros shared by both passes, the copies it gives each loop): an op without an
``op_name`` that only moves data and is read only by a pass's ops is part of it too.

Where XLA removed or unrolled the loops (the stand-in keeps a loop of two or more trips
for every shape but 1 x 1 attention, so XLA:CPU and XLA:TPU keep them; GPU compilers may
unroll short loops), the first marked op of the pass that multiplies takes the kernel's
cost: one call per computation and pass is then assumed, so two unrolled calls of the
same shapes in one computation count once. XLA:CPU strips the metadata of the products
it unrolls; with no marked op that multiplies, they are costed as compiled.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from roofline.errors import HloParseError, quoted
from roofline.hardware.records import ExecutionUnit
from roofline.program.hlo.calls import CallGraph, all_called
from roofline.program.hlo.op_cost import OpCost
from roofline.program.hlo.parser import HloModule, Instruction
from roofline.program.hlo.rules import OpCategory
from roofline.program.hlo.shapes import ELEMENT_BITS, SPEC_DTYPE

__all__ = ["FLASH_MARK", "FlashPass", "FlashSite", "FlashWork", "find_pass", "flash_sites",
           "flash_work", "site_cost"]

# What every marker starts with: a cheap test before an op name is parsed.
FLASH_MARK = "flash_attention_"
_MARKER = re.compile(r"flash_attention_(fwd|bwd)\{([^{}\"]*)\}")
# The marker's keys, in the order it writes them, and the FlashPass field each names.
_KEYS = {"b": "batch", "sq": "seq_q", "skv": "seq_kv", "kvh": "kv_heads", "g": "group",
         "d": "head_dim", "causal": "causal", "bq": "block_q", "bkv": "block_kv",
         "dtype": "dtype"}
# Written only where it is not 1: the shares of a context-parallel attention.
_SHARDS_KEY = "sp"
# The softmax statistics (logsumexp, D) and dQ's accumulator are f32.
_F32_BYTES = ELEMENT_BITS["f32"] / 8


@dataclass(frozen=True)
class FlashPass:
    """One pass of a flash attention call as one device runs it: the shapes of its
    query (``batch, seq_q, kv_heads, group, head_dim``) and keys (``batch, seq_kv,
    kv_heads, head_dim``), its mask, its blocks and the HLO element type of q, k, v."""

    backward: bool
    batch: int
    seq_q: int
    seq_kv: int
    kv_heads: int
    group: int
    head_dim: int
    causal: bool
    block_q: int
    block_kv: int
    dtype: str
    # Context parallelism: the queries are one of ``shards`` equal shares of a causal
    # attention over the whole key sequence (``seq_kv = shards x seq_q``), each share
    # two chunks, one from each end of the sequence, so that every device sees as many
    # keys as the others (load-balanced, as MaxText's context parallelism splits it).
    shards: int = 1

    @property
    def marker(self) -> str:
        """The scope name the pass is traced in (module docstring)."""
        values = {key: getattr(self, name) for key, name in _KEYS.items()}
        values["causal"] = int(self.causal)
        if self.shards > 1:
            values[_SHARDS_KEY] = self.shards
        body = ",".join(f"{key}={value}" for key, value in values.items())
        return f"{FLASH_MARK}{'bwd' if self.backward else 'fwd'}{{{body}}}"

    @property
    def name(self) -> str:
        return "backward" if self.backward else "forward"

    @property
    def all_pairs(self) -> int:
        """(query block, key block) pairs of the whole score matrix."""
        return (self.seq_q // self.block_q) * (self.seq_kv // self.block_kv)

    @property
    def pairs(self) -> int:
        """The pairs the kernel computes: all of them, or with a causal mask those with a
        key that a query of the block may see. Query ``t`` sees keys up to
        ``t + seq_kv - seq_q``, so query block ``i``, whose last query is
        ``(i + 1) * block_q - 1``, reaches key blocks ``0 .. (that + seq_kv - seq_q) //
        block_kv``: ``i + 1`` of them for equal sequences and blocks, and of ``n`` blocks
        ``n (n + 1) / 2`` pairs in all."""
        kv_blocks = self.seq_kv // self.block_kv
        if not self.causal:
            return self.all_pairs
        if self.shards > 1:   # an equal share of the whole causal attention's pairs
            whole = dataclasses.replace(self, seq_q=self.seq_kv, shards=1)
            return -(-whole.pairs // self.shards)
        offset = self.seq_kv - self.seq_q
        return sum(min(max(((i + 1) * self.block_q - 1 + offset) // self.block_kv + 1, 0),
                       kv_blocks) for i in range(self.seq_q // self.block_q))


@dataclass(frozen=True)
class FlashWork:
    """What one pass's kernels do (an FMA is 2 FLOPs; bytes cross main memory)."""

    flops: float
    transcendentals: float
    bytes_read: float
    bytes_written: float


def flash_work(p: FlashPass) -> FlashWork:
    """The work of the kernel(s) of one pass, from its blocked algorithm (FlashAttention-2,
    Algorithm 1 forward, Algorithm 2 backward): every block pair the kernel computes is
    computed whole (a causal diagonal block too), and each pair reads its blocks from
    main memory (on-chip reuse across pairs beyond that is the kernel's, not counted)."""
    size = ELEMENT_BITS[p.dtype] / 8
    heads = p.batch * p.kv_heads * p.group     # query heads of every sequence
    q_elements = heads * p.seq_q * p.head_dim  # Q, O, dO (and dQ)
    kv_elements = p.batch * p.seq_kv * p.kv_heads * p.head_dim   # K, V (dK, dV)
    q_block = heads * p.block_q * p.head_dim   # one query block of every head
    # One key block of every K/V head: read once for the whole group of its query heads.
    kv_block = p.batch * p.block_kv * p.kv_heads * p.head_dim
    scores = heads * p.block_q * p.block_kv * p.pairs   # score elements computed
    # Forward: S = Q K^T and O += P V, each 2 * block_q * block_kv * head_dim FLOPs per
    # pair and head; one exp per score (P = exp(S - m)).
    flops = 2 * 2 * p.head_dim * scores
    transcendentals = scores
    if not p.backward:
        # Q read once (its block stays on chip over the key blocks), K and V blocks once
        # per pair; O written, and the f32 logsumexp of every query row.
        read = q_elements * size + p.pairs * 2 * kv_block * size
        written = q_elements * size + heads * p.seq_q * _F32_BYTES
        return FlashWork(flops, transcendentals, read, written)
    # Backward: five block products per pair (S recomputed, dV += P^T dO, dP = dO V^T,
    # dQ += dS K, dK += dS^T Q) against the forward's two: 2.5x its FLOPs; P recomputed
    # from S and the saved logsumexp: the forward's exps.
    rows = heads * p.block_q * _F32_BYTES      # one f32 statistic per row of a query block
    # Per key block: K and V read, dK and dV written once. Per pair: the Q and dO blocks,
    # the block's logsumexp and D (f32) read, its f32 dQ accumulator read and written.
    # Before the loops, D = rowsum(dO * O) reads O and dO once and writes D (f32).
    read = (2 * kv_elements * size
            + p.pairs * (2 * q_block * size + 2 * rows + q_block * _F32_BYTES)
            + 2 * q_elements * size)
    written = (2 * kv_elements * size + p.pairs * q_block * _F32_BYTES
               + heads * p.seq_q * _F32_BYTES)
    return FlashWork(2.5 * flops, transcendentals, read, written)


def find_pass(op_name: str) -> FlashPass | None:
    """The pass an op's ``op_name`` names; None for an op of no flash attention."""
    match = _MARKER.search(op_name) if FLASH_MARK in op_name else None
    if match is None:
        return None
    values: dict[str, str] = {}
    for item in match.group(2).split(","):
        key, _, value = item.partition("=")
        values[key] = value
    shards = values.pop(_SHARDS_KEY, "1")
    if not shards.isdigit() or int(shards) < 1:
        raise _bad_marker(op_name, f"{_SHARDS_KEY}={shards} is not a positive integer")
    if set(values) != set(_KEYS):
        raise _bad_marker(op_name, f"its keys are {', '.join(values)}, not "
                          f"{', '.join(_KEYS)}")
    if values["dtype"] not in ELEMENT_BITS or values["dtype"] not in SPEC_DTYPE:
        raise _bad_marker(op_name, f"dtype={values['dtype']} is no HLO element type")
    numbers: dict[str, int] = {}
    for key, value in values.items():
        if key != "dtype":
            if not value.isdigit() or (int(value) < 1 and key != "causal"):
                raise _bad_marker(op_name, f"{key}={value} is not a positive integer")
            numbers[_KEYS[key]] = int(value)
    found = FlashPass(match.group(1) == "bwd", numbers["batch"], numbers["seq_q"],
                      numbers["seq_kv"], numbers["kv_heads"], numbers["group"],
                      numbers["head_dim"], numbers["causal"] > 0, numbers["block_q"],
                      numbers["block_kv"], values["dtype"], int(shards))
    if found.seq_q % found.block_q or found.seq_kv % found.block_kv:
        raise _bad_marker(op_name, "its blocks do not divide its sequences")
    if found.shards > 1 and found.seq_kv != found.shards * found.seq_q:
        raise _bad_marker(op_name, f"{found.shards} shares of {found.seq_kv} keys are not "
                          f"{found.seq_q} queries each")
    return found


def _bad_marker(op_name: str, problem: str) -> HloParseError:
    return HloParseError(f"op_name {quoted(op_name, 120)} carries a flash attention marker "
                         f"that does not parse: {problem}")


# What an op without metadata may do and still be part of a kernel: move or fill data.
_MOVES = frozenset({"parameter", "constant", "broadcast", "copy", "bitcast", "reshape",
                    "transpose", "tuple", "get-tuple-element"})


@dataclass(frozen=True)
class FlashSite:
    """An op of a flash attention pass in a computation that runs ops one after another
    (the entry, a loop's body, a called computation or branch): the pass's kernel
    (``kernel``; ``unrolled`` where it is not a loop), or a part of it that costs nothing,
    ``charged_at`` the kernel's op ("" where that is in another computation: a piece JAX
    or XLA moved out of the loops; or where no marked op multiplies, XLA having stripped
    the metadata of the products it unrolled, which are then costed as compiled)."""

    flash: FlashPass
    kernel: bool
    unrolled: bool
    charged_at: str


def flash_sites(module: HloModule, calls: CallGraph) -> dict[str, FlashSite]:
    """Every op of a flash attention pass (its marked ops, and the ops without metadata
    that feed only them) in the computations that run ops in sequence, reached from the
    entry through loops, calls and conditionals but not through the pass's own ops (a
    kernel loop's body is the kernel's), by instruction name (unique in a module)."""
    sites: dict[str, FlashSite] = {}
    seen: set[str] = set()
    stack = [module.entry_name]
    while stack:
        name = stack.pop()
        if name in seen or name not in module.computations:
            continue
        seen.add(name)
        instructions = module.computations[name].instructions
        marked = [(i, found) for i in instructions if FLASH_MARK in i.attribute_text
                  and (found := find_pass(i.op_name)) is not None]
        if marked:
            sites.update(_sites_of(module, calls, instructions, marked))
        stack.extend(called for i in instructions
                     if i.opcode in ("while", "call", "conditional") and i.name not in sites
                     for called in i.called)
    return sites


def _sites_of(module: HloModule, calls: CallGraph, instructions: list[Instruction],
              marked: list[tuple[Instruction, FlashPass]]) -> dict[str, FlashSite]:
    """The sites of one computation. A marked loop that multiplies matrices is a kernel
    (a call each: unrolled layers call it once per layer); JAX's partial evaluation splits
    pieces off a pass (the loops that stack the key blocks, masks and zeros it computes
    ahead), which multiply nothing and are parts. A pass without such a loop here, but
    with a marked op that multiplies (XLA removed or unrolled its loops), is one call
    costed at the first of them. The data movers without metadata that only those read
    are parts too."""
    loops = {i.name for i, _ in marked if i.opcode == "while" and _multiplies(calls, i)}
    looped = {flash for i, flash in marked if i.name in loops}
    unrolled: dict[FlashPass, str] = {}
    for instruction, flash in marked:
        if flash not in looped and flash not in unrolled and _multiplies(calls, instruction):
            unrolled[flash] = instruction.name
    kernel_of = {**unrolled, **{flash: i.name for i, flash in reversed(marked)
                                if i.name in loops}}
    sites = {}
    for instruction, flash in marked:
        kernel = instruction.name in loops or unrolled.get(flash) == instruction.name
        sites[instruction.name] = FlashSite(flash, kernel, flash in unrolled,
                                            kernel_of.get(flash, ""))
    users: dict[str, list[str]] = {}
    for instruction in instructions:
        for operand in instruction.operands:
            users.setdefault(operand, []).append(instruction.name)
    for instruction in reversed(instructions):   # users before what they read
        readers = users.get(instruction.name)
        if (readers and instruction.name not in sites and not instruction.op_name
                and all(reader in sites for reader in readers)
                and _moves_data(module, instruction)):
            sites[instruction.name] = dataclasses.replace(sites[readers[0]], kernel=False)
    return sites


def _multiplies(calls: CallGraph, instruction: Instruction) -> bool:
    """Whether an op multiplies matrices: is a dot or convolution, or calls one."""
    return instruction.opcode in ("dot", "convolution") or any(
        {"dot", "convolution"} & calls.contents(name).opcodes
        for name in calls.reachable(all_called(instruction)))


def _moves_data(module: HloModule, instruction: Instruction) -> bool:
    """Whether an op only moves or fills data (itself, or every op of its fusion)."""
    if instruction.opcode != "fusion":
        return instruction.opcode in _MOVES
    return all(name in module.computations and {
        i.opcode for i in module.computations[name].instructions} <= _MOVES
        for name in instruction.called)


def site_cost(instruction: Instruction, site: FlashSite, platform: str) -> OpCost:
    """The cost of an op of a flash attention pass: the pass's kernel(s) as one matrix
    op, or nothing."""
    p = site.flash
    dtype = SPEC_DTYPE[p.dtype]
    if not site.kernel:
        where = (f"costed at {site.charged_at}" if site.charged_at else
                 "costed where its products are")
        return OpCost(name=instruction.name, opcode=instruction.opcode,
                      category=OpCategory.OTHER, dtype=dtype, unit=ExecutionUnit.VECTOR,
                      flops=0.0, transcendentals=0.0, bytes_read=0.0, bytes_written=0.0,
                      onchip_bytes=0.0, link_bytes=0.0, op_name=instruction.op_name,
                      operands=instruction.operands, free=True, kernels=0, platform=platform,
                      notes=(f"part of a flash attention {p.name}, {where}",))
    work = flash_work(p)
    mask = (f"causal, {p.all_pairs - p.pairs} of {p.all_pairs} block pairs skipped"
            if p.causal else f"not causal, {p.all_pairs} block pairs")
    kernels = " as 2 kernels (dQ, dK/dV)" if p.backward else ""
    note = (f"flash attention {p.name} ({mask}): costed from its blocked algorithm"
            f"{kernels}; the program computes it as XLA loops")
    if site.unrolled:
        note += (" that XLA removed or unrolled: one call per computation assumed, costed at "
                 "its first marked op that multiplies")
    return OpCost(name=instruction.name, opcode="custom-call", category=OpCategory.MATMUL,
                  dtype=dtype, unit=ExecutionUnit.MATRIX, flops=work.flops,
                  transcendentals=work.transcendentals, bytes_read=work.bytes_read,
                  bytes_written=work.bytes_written, onchip_bytes=0.0, link_bytes=0.0,
                  op_name=instruction.op_name, operands=instruction.operands,
                  kernels=2 if p.backward else 1, written_dtype=dtype, platform=platform,
                  notes=(note,))
