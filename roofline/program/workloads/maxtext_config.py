"""A training run stated as MaxText states it: a YAML file of MaxText's configuration keys
(``configs/base.yml``'s names), read into the ``train`` family's SPEC.

``roofline analyze run.yml --hardware tpu-v5e`` answers for the run the file describes.
The keys read, and what each becomes, are :data:`KEYS`; a key that would change the step
in a way the family does not build (pipeline, sequence or expert parallelism, data
parallelism of another kind over the data-center network) is refused with its value, and
every other key (logging, checkpointing, data loading) is left out of the answer as it
does not change the step's program, the names of those left out said.

``compile_topology`` (MaxText's ahead-of-time compile target, ``v5e-256``) gives the
number of devices, so that a parallelism of ``-1`` (MaxText's "the rest of the devices")
can be resolved and ``per_device_batch_size`` turned into sequences; without it every
degree must be given. TPU v4 and v5p name their slices by TensorCores (two per chip,
one JAX device), v5e and v6e by chips.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.input_files import MAXTEXT_CONFIG, read_input_text

MLP_ACTIVATIONS = {("silu", "linear"): "swiglu", ("gelu", "linear"): "geglu",
                   ("gelu",): "gelu", ("relu",): "relu"}
ATTENTION = {"dot_product": "full", "flash": "flash", "cudnn_flash_te": "flash",
             "autoselected": "flash", "cudnn_flash_jax": "flash"}
OPTIMIZER = {"adamw": "adamw", "adam_pax": "adamw", "sgd": "sgd", "adafactor": "adafactor"}
DTYPE = {"float32": "f32", "bfloat16": "bf16"}
PARALLELISM = {"ici_data_parallelism": "dp", "ici_fsdp_parallelism": "fsdp",
               "ici_tensor_parallelism": "tp", "ici_expert_parallelism": "ep",
               "ici_context_parallelism": "sp", "dcn_data_parallelism": "slices"}
# Degrees the family does not build: refused unless 1.
UNSUPPORTED = ("ici_sequence_parallelism", "ici_pipeline_parallelism",
               "ici_fsdp_transpose_parallelism", "ici_tensor_transpose_parallelism",
               "ici_tensor_sequence_parallelism", "dcn_fsdp_parallelism",
               "dcn_tensor_parallelism", "dcn_sequence_parallelism",
               "dcn_expert_parallelism", "dcn_pipeline_parallelism",
               "dcn_context_parallelism", "dcn_fsdp_transpose_parallelism")
# Slices of a compile_topology's count: TensorCores on v2-v5p (JAX devices are cores on
# v2/v3, two-core chips on v4/v5p), chips on v5e and v6e.
_CORES_PER_DEVICE = {"v2": 1, "v3": 1, "v4": 2, "v5p": 2, "v5e": 1, "v5litepod": 1,
                     "v6e": 1}


def _text(value: Any) -> str:
    return str(value).strip()


def _choice(table: Mapping[Any, str]) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        key = tuple(value) if isinstance(value, list) else _text(value)
        if key not in table:
            raise ValueError(f"one of {', '.join(map(str, table))}")
        return table[key]
    return convert


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError("true or false")


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError("a positive whole number")
    return value


def _quantization(value: Any) -> str:
    if value in ("", None):
        return "none"
    if value == "fp8":
        return "fp8"
    raise ValueError("fp8 or empty (int8 and other formats are not built for training)")


# MaxText key -> (the train family's parameter, how its value converts).
KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "model_name": ("config", _text),
    "base_num_decoder_layers": ("layers", _positive_int),
    "base_emb_dim": ("d_model", _positive_int),
    "base_num_query_heads": ("heads", _positive_int),
    "base_num_kv_heads": ("kv_heads", _positive_int),
    "head_dim": ("head_dim", _positive_int),
    "base_mlp_dim": ("d_ff", _positive_int),
    "vocab_size": ("vocab", _positive_int),
    "num_experts": ("experts", _positive_int),
    "num_experts_per_tok": ("top_k", _positive_int),
    "base_moe_mlp_dim": ("expert_d_ff", _positive_int),
    "mlp_activations": ("mlp", _choice(MLP_ACTIVATIONS)),
    "logits_via_embedding": ("tied", _flag),
    "max_target_length": ("seq", _positive_int),
    "gradient_accumulation_steps": ("grad_accum", _positive_int),
    "remat_policy": ("remat", _text),
    "attention": ("attention", _choice(ATTENTION)),
    "opt_type": ("optimizer", _choice(OPTIMIZER)),
    "mu_dtype": ("moments", _choice(DTYPE)),
    "weight_dtype": ("weights", _choice(DTYPE)),
    "dtype": ("dtype", _choice(DTYPE)),
    "quantization": ("quantization", _quantization),
    "capacity_factor": ("capacity_factor", float),
    "scan_layers": ("scan", _flag),
}
# Read for the batch and the mesh, not passed on as they are.
MESH_KEYS = ("per_device_batch_size", "compile_topology", "compile_topology_num_slices",
             *PARALLELISM, *UNSUPPORTED)


def _devices_of(topology: str, where: str) -> int:
    """JAX devices of a MaxText ``compile_topology`` (``v5e-256``)."""
    generation, dash, count = topology.rpartition("-")
    if not dash or generation not in _CORES_PER_DEVICE or not count.isdigit():
        raise RooflineError(f"{where}: compile_topology={topology!r} is not a TPU slice "
                            "name such as v5e-256, v5p-512 or v4-128")
    cores = int(count)
    per_device = _CORES_PER_DEVICE[generation]
    if cores % per_device or cores == 0:
        raise RooflineError(f"{where}: compile_topology={topology!r}: {generation} slices "
                            f"count {per_device} TensorCores a device; give a multiple")
    return cores // per_device


def _config(path: Path) -> dict[str, Any]:
    import yaml

    text = read_input_text(path, MAXTEXT_CONFIG)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RooflineError(f"{path}: not valid YAML ({exc}); a MaxText configuration is "
                            "a mapping of its keys (configs/base.yml)") from None
    if not isinstance(data, dict):
        raise RooflineError(f"{path}: a MaxText configuration is a mapping of keys to "
                            f"values, not {type(data).__name__}")
    return data


def spec_from_maxtext(path: str | Path) -> tuple[str, tuple[str, ...]]:
    """The ``train`` SPEC the MaxText configuration at ``path`` states, and the keys it
    holds that do not change the step (left out)."""
    path = Path(path)
    data = _config(path)
    params: dict[str, Any] = {}
    for key, (name, convert) in KEYS.items():
        if key in data and data[key] is not None:
            try:
                params[name] = convert(data[key])
            except (ValueError, TypeError) as exc:
                raise RooflineError(f"{path}: {key}={data[key]!r} must be {exc}") from None
    for key in UNSUPPORTED:
        if data.get(key, 1) not in (1, None):
            raise RooflineError(f"{path}: {key}={data[key]!r}: the train family builds data, "
                                "FSDP, expert, context and tensor parallelism within a "
                                "slice and data parallelism across slices; set it to 1")
    params.update(_mesh(path, data))
    ignored = tuple(sorted(k for k in data if k not in KEYS and k not in MESH_KEYS))
    return "train:" + ",".join(f"{k}={v}" for k, v in params.items()), ignored


def _mesh(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The degrees and the batch in sequences, from MaxText's parallelism keys."""
    where = str(path)
    degrees: dict[str, int] = {}
    for key, name in PARALLELISM.items():
        value = data.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or value == 0 or value < -1:
            raise RooflineError(f"{where}: {key}={value!r} must be a positive whole number "
                                "or -1 (the rest of the devices)")
        degrees[name] = value
    topology = data.get("compile_topology")
    slices = data.get("compile_topology_num_slices", degrees["slices"])
    if slices != degrees["slices"] and degrees["slices"] != -1:
        raise RooflineError(f"{where}: compile_topology_num_slices={slices} and "
                            f"dcn_data_parallelism={degrees['slices']} disagree: data "
                            "parallelism across slices is the only kind built; give both "
                            "the same")
    degrees["slices"] = _positive_int(slices) if isinstance(slices, int) else 1
    filled = [name for name, value in degrees.items() if value == -1]
    if topology is not None:
        devices = _devices_of(_text(topology), where) * degrees["slices"]
        known = math.prod(v for v in degrees.values() if v != -1)
        if len(filled) > 1 or devices % known:
            raise RooflineError(f"{where}: the parallelism degrees do not fill the "
                                f"{devices} devices of {topology} x {degrees['slices']} "
                                "slice(s): give at most one -1 and degrees whose product "
                                "divides the devices")
        if filled:
            degrees[filled[0]] = devices // known
        if math.prod(degrees.values()) != devices:
            raise RooflineError(f"{where}: the parallelism degrees multiply to "
                                f"{math.prod(degrees.values())} devices, {topology} x "
                                f"{degrees['slices']} slice(s) has {devices}")
    elif filled:
        raise RooflineError(f"{where}: {filled[0]} is -1 (the rest of the devices) but no "
                            "compile_topology says how many there are: give "
                            "compile_topology (such as v5e-256) or every degree")
    devices = math.prod(degrees.values())
    per_device = data.get("per_device_batch_size", 1)
    if isinstance(per_device, bool) or not isinstance(per_device, (int, float)) \
            or per_device <= 0:
        raise RooflineError(f"{where}: per_device_batch_size={per_device!r} must be a "
                            "positive number")
    accumulation = data.get("gradient_accumulation_steps", 1)
    sequences = per_device * devices
    if abs(sequences - round(sequences)) > 1e-9 or round(sequences) == 0:
        raise RooflineError(f"{where}: per_device_batch_size={per_device} over {devices} "
                            f"devices is {sequences:g} sequences, not a whole number: give "
                            "a per_device_batch_size that makes whole sequences")
    return {**degrees, "batch": int(round(sequences)) * accumulation}
