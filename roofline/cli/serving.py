"""``roofline llm``: a language model served on one or more devices (or on one device and
the same with parameters scaled): time to first token, time per output token, tokens per
second, the batch where decode stops being memory-bound and the largest batch that fits."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from roofline.api import load_hardware
from roofline.cli.common import Parents, cache_dir_of, key_values, save_plot, scale_factor
from roofline.errors import RooflineError
from roofline.outputs import write_text_atomic


def _llm(args: argparse.Namespace) -> int:
    from roofline.api import CompileOptions, PlacementOptions, serving, serving_curve
    from roofline.model.llm import decoder_workload
    from roofline.render.serving import serving_document, serving_text
    from roofline.render.tables import to_csv, to_json

    decoder_workload(args.spec)   # a SPEC that is no decoder fails before any work
    if args.scale and len(args.hardware) != 1:
        raise RooflineError("--scale compares one device with itself scaled: give one "
                            "--hardware")
    devices = [(hw_id, load_hardware(hw_id, args.hardware_dir)) for hw_id in args.hardware]
    if args.scale:
        factors = key_values(args.scale, scale_factor, "--scale")
        scaled = devices[0][1].scaled(factors)
        devices.append((f"{devices[0][0]} " + " ".join(args.scale), scaled))
    placement = PlacementOptions(overlap=args.overlap)
    compile = CompileOptions(compile_target=args.target, cache_dir=cache_dir_of(args))
    answers = [serving(args.spec, hardware, placement=placement, compile=compile)
               for _, hardware in devices]
    labels = [label for label, _ in devices]
    if args.format == "json":
        text = to_json(serving_document(answers, labels))
    elif args.format == "csv":
        entries = serving_document(answers, labels)["devices"]
        rows = [{k: v for k, v in e.items() if not isinstance(v, dict)} for e in entries]
        text = to_csv(rows, list(rows[0]))
    else:
        text = serving_text(answers, labels)
    if args.out:
        write_text_atomic(args.out, text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    if args.plot:
        from roofline.api import build_serving_curves

        curves = [(label, serving_curve(args.spec, hw, placement=placement, compile=compile),
                   answer.devices) for (label, hw), answer in zip(devices, answers)]
        save_plot(build_serving_curves(curves, title=answers[0].spec), args.plot)
    if args.roofline_plot:
        _save_phases_roofline(answers[0], labels[0], args.roofline_plot)
    return 0


def _save_phases_roofline(answer: Any, label: str, path: str) -> None:
    """The prefill and decode ops of the first device on its roofline, one colour each."""
    import dataclasses

    from roofline.api import build_roofline
    from roofline.render.plot import predicted_points

    points = [dataclasses.replace(point, category=step.phase)
              for step in (answer.prefill, answer.decode)
              for point in predicted_points(step.placement)]
    save_plot(build_roofline([answer.decode.placement.hardware], points,
                             title=f"{answer.spec}: prefill (batch {answer.prefill.batch}) "
                                   f"and decode ops on {label}"), path)


def add_parsers(commands: Any, parents: Parents) -> None:
    p = commands.add_parser(
        "llm", parents=[parents.common, parents.formatted, parents.compiling],
        help="a language model served: time to first token, time per output token, "
             "tokens/s, where decode stops being memory-bound, the largest batch that fits")
    p.add_argument("spec", metavar="SPEC",
                   help="a decoder SPEC: decoder:config=llama2-7b,batch=16,prompt=512,"
                        "context=4096[,tp=8] (its batch, prompt and context are the "
                        "served ones; its phase is ignored)")
    p.add_argument("--hardware", action="append", required=True, metavar="ID",
                   help="the device (repeat to compare devices, e.g. h100-sxm and h200)")
    p.add_argument("--target", help="compile target (default: each hardware's own: its "
                                    "TPU, its NVIDIA GPU without one, else host); a "
                                    "sharded SPEC takes a slice big enough, or name one "
                                    "(tpu-v5e:2x4, h100-sxm:8)")
    p.add_argument("--scale", action="append", default=[], metavar="PARAM=FACTOR",
                   help="also answer on the one --hardware with these parameters scaled, "
                        "e.g. memory_bandwidth=1.5, memory_capacity=2")
    p.add_argument("--overlap", choices=("max", "sum"), default="max")
    p.add_argument("--out", metavar="FILE", help="write the output to FILE instead of stdout")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw tokens/s per device against latency, batch 1 to 256 "
                        "(each batch compiled for each device)")
    p.add_argument("--roofline-plot", metavar="FILE",
                   help="also draw the prefill and decode ops on the first device's roofline")
    p.set_defaults(handler=_llm)
