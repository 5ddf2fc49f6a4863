"""A training step's figures (:mod:`roofline.model.training_step`) and a program's
rematerialization (:mod:`roofline.program.hlo.remat`), as JSON and text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roofline.units import Kind, format_quantity

if TYPE_CHECKING:
    from roofline.model.training_step import TrainingStep
    from roofline.program.hlo.remat import Rematerialization


def remat_document(remat: Rematerialization) -> dict[str, Any]:
    """What a program recomputes, by its checkpoint policy and by XLA on its own."""
    def part(found: Any) -> dict[str, Any]:
        return {"kernels": found.kernels, "flops": found.flops, "names": list(found.names)}
    return {"by_policy": part(remat.by_policy), "by_compiler": part(remat.by_compiler),
            "program_flops": remat.flops}


def remat_text(doc: dict[str, Any]) -> list[str]:
    """Lines for people; XLA's own rematerialization is always said where it happened."""
    lines = []
    total = doc["program_flops"] or 1.0
    policy, compiler = doc["by_policy"], doc["by_compiler"]
    if policy["kernels"]:
        lines.append(f"rematerialization by the program's checkpoint policy: "
                     f"{policy['kernels']:,} kernels recompute {policy['flops']:.4g} FLOPs "
                     f"({policy['flops'] / total:.1%} of the step's)")
    if compiler["kernels"]:
        lines.append(f"XLA REMATERIALIZED ON ITS OWN to fit the device's memory: "
                     f"{compiler['kernels']:,} kernels ({', '.join(compiler['names'])}...) "
                     f"recompute {compiler['flops']:.4g} FLOPs "
                     f"({compiler['flops'] / total:.1%} of the step's), counted in every "
                     "figure here")
    return lines


def training_document(step: TrainingStep) -> dict[str, Any]:
    """``analyze``'s ``training`` object: the run, its FLOPs, times, MFU, collectives."""
    run = step.run
    return {
        "model": run.model.name,
        "batch": run.batch, "seq": run.seq, "grad_accum": run.grad_accum,
        "tokens_per_step": run.tokens, "devices": run.devices,
        "per_device_batch": run.per_device_batch,
        "mesh": dict(run.degrees), "remat": run.remat, "attention": run.attention,
        "optimizer": run.optimizer, "moments": run.moments, "weights": run.weights,
        "dtype": run.dtype, "quantization": run.quantization, "scan": run.scan,
        "model_flops_per_device": step.model_flops.total,
        "model_flops_weights": step.model_flops.weights,
        "model_flops_attention": step.model_flops.attention,
        "model_flops_formula": "MaxText calculate_tflops_training_per_device",
        "hardware_flops_per_device": step.hardware_flops,
        "matrix_flops_per_device": step.matrix_flops,
        "step_seconds": step.step_seconds, "timed_by": step.timed_by,
        "bound_seconds": step.bound_seconds,
        "tokens_per_s": step.tokens_per_s,
        "peak_flop_per_s": step.peak_flop_per_s,
        "mfu": step.mfu(), "mfu_at_bound": step.mfu(step.bound_seconds), "hfu": step.hfu,
        "config_file": step.config_file or None,
        "ignored_keys": list(step.ignored_keys),
        "collectives": [{"kind": c.kind, "kernels": c.kernels, "link_bytes": c.link_bytes,
                         "seconds": c.seconds} for c in step.collectives],
    }


def training_text(doc: dict[str, Any]) -> list[str]:
    """The ``training`` object for people."""
    q = format_quantity
    mesh = " x ".join(f"{n} {axis}" for axis, n in doc["mesh"].items() if n > 1) or "1 device"
    flops = doc["model_flops_per_device"]
    lines = [
        f"training step of {doc['model']}: {doc['batch']:,} sequences of {doc['seq']:,} tokens "
        f"({doc['tokens_per_step']:,} tokens) per optimizer step"
        + (f" in {doc['grad_accum']} micro-batches" if doc["grad_accum"] > 1 else "")
        + f", on {doc['devices']:,} devices ({mesh}; {doc['per_device_batch']:g} sequences "
        f"per device per micro-batch); {doc['optimizer']} ({doc['moments']} moments, "
        f"{doc['weights']} master weights), remat={doc['remat']}, "
        f"attention={doc['attention']}" + (f", {doc['quantization']} products"
                                           if doc["quantization"] else ""),
        f"  model FLOPs per device {flops:.4g} ({doc['model_flops_formula']}: weights "
        f"{doc['model_flops_weights']:.4g}, causal attention "
        f"{doc['model_flops_attention']:.4g}); the program executes "
        f"{doc['hardware_flops_per_device']:.4g} ({doc['hardware_flops_per_device'] / flops:.2f}"
        f"x; matrix {doc['matrix_flops_per_device']:.4g})",
        f"  expected step {q(doc['step_seconds'], Kind.TIME)}, {doc['timed_by']}: "
        f"{doc['tokens_per_s']:,.0f} tokens/s, MFU {doc['mfu']:.1%} (model FLOPs over the "
        f"step and the bf16 matrix peak, {q(doc['peak_flop_per_s'], Kind.FLOP_RATE)}), HFU "
        f"{doc['hfu']:.1%} (the matrix FLOPs executed)",
        f"  roofline bound {q(doc['bound_seconds'], Kind.TIME)} at datasheet peaks, its "
        f"asynchronous collectives under compute: MFU at most {doc['mfu_at_bound']:.1%}",
    ]
    if doc["config_file"]:
        lines.insert(0, f"run stated in {doc['config_file']} (MaxText configuration keys)"
                     + ("; keys that do not change the step, left out: "
                        + ", ".join(doc["ignored_keys"]) if doc["ignored_keys"] else ""))
    if doc["collectives"]:
        lines.append("  collectives per step: " + "; ".join(
            f"{c['kind']} {c['kernels']:,} ({q(c['link_bytes'], Kind.BYTES)} sent, "
            f"{q(c['seconds'], Kind.TIME)} at the link roofs)" for c in doc["collectives"]))
    return lines
