"""``roofline llm``: a language model served on one or more devices (or on one device and
the same with parameters scaled): time to first token, time per output token, tokens per
second, the batch where decode stops being memory-bound and the largest batch that fits."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from roofline.cli.common import (
    Parents,
    bounded_int,
    compile_options_of,
    duration_seconds,
    emit,
    key_values,
    positive_float,
    save_plot,
    scale_factor,
)
from roofline.errors import ArgumentError, DoesNotFitError, RooflineError
from roofline.limits import usable_cores
from roofline.model.serving_defaults import (
    MAX_SEQUENCES,
    MOST_REQUESTS,
    REQUESTS,
    SEED,
    TOKEN_BUDGET,
)
from roofline.model.step_timing import StepTiming

if TYPE_CHECKING:
    from roofline.api import Lengths

# The model's arguments (and questions) that its errors name, as this command line asks
# for them.
OPTIONS = {"inputs": "--input-len", "outputs": "--output-len", "rate": "--rate",
           "requests": "--requests", "seed": "--seed", "ttft_s": "--ttft",
           "tpot_s": "--tpot", "token_budget": "--token-budget",
           "max_sequences": "--max-sequences",
           "serving()": "'roofline llm' without --input-len"}


@contextlib.contextmanager
def _worded_as_options(names: Mapping[str, str] = OPTIONS) -> Iterator[None]:
    """The model's errors about its arguments, naming this command line's options."""
    try:
        yield
    except ArgumentError as exc:
        raise RooflineError(exc.worded(names)) from None


def _llm(args: argparse.Namespace) -> int:
    from roofline.api import PlacementOptions, load_hardware, serving, serving_curve
    from roofline.model.llm import decoder_workload
    from roofline.render.serving import device_rows, serving_document, serving_text

    decoder_workload(args.spec)   # a SPEC that is no decoder fails before any work
    if (args.input_len is None) != (args.output_len is None):
        raise RooflineError("--input-len and --output-len go together: give both for a "
                            "batch generating over its growing context, or neither")
    if args.scale and len(args.hardware) != 1:
        raise RooflineError("--scale compares one device with itself scaled: give one "
                            "--hardware")
    devices = [(hw_id, load_hardware(hw_id, args.hardware_dir)) for hw_id in args.hardware]
    if args.scale:
        factors = key_values(args.scale, scale_factor, "--scale")
        scaled = devices[0][1].scaled(factors)
        devices.append((f"{devices[0][0]} " + " ".join(args.scale), scaled))
    placement = PlacementOptions(overlap=args.overlap, timing=StepTiming(args.timing))
    compile = compile_options_of(args)
    if args.input_len is not None:
        return _generation(args, devices, placement, compile)
    answers = [serving(args.spec, devices[0][1], placement=placement, compile=compile)]
    refused = ""
    for label, hardware in devices[1:]:
        try:
            answers.append(serving(args.spec, hardware, placement=placement,
                                   compile=compile))
        except DoesNotFitError as exc:
            if not args.scale:
                raise
            # The what-if does not fit: the device as it is still answers.
            refused = f"{label}: {exc}"
            devices = devices[:1]
    labels = [label for label, _ in devices]
    # Every figure is drawn before any output is written: one that fails writes nothing.
    figures = []
    if args.plot:
        from roofline.api import build_serving_curves

        curves = [(label, serving_curve(args.spec, hw, placement=placement, compile=compile),
                   answer.devices) for (label, hw), answer in zip(devices, answers)]
        figures.append((build_serving_curves(curves, title=answers[0].spec), args.plot))
    if args.roofline_plot:
        figures.append((_phases_roofline(answers[0], labels[0]), args.roofline_plot))
    document = serving_document(answers, labels)
    text = serving_text(answers, labels)
    if refused:
        document["not_answered"] = refused
        text += f"\nnot answered: {refused}\n"
    emit(args, text=text, document=document, rows=device_rows(document), out=args.out)
    for figure, path in figures:
        save_plot(figure, path)
    return 0


def _lengths(args: argparse.Namespace) -> tuple[Lengths, Lengths]:
    from roofline.api import Lengths

    def parsed(text: str, option: str) -> Lengths:
        with _worded_as_options({"lengths": option}):
            return Lengths.parse(text)
    return parsed(args.input_len, "--input-len"), parsed(args.output_len, "--output-len")


def _generation(args: argparse.Namespace, devices: list[tuple[str, Any]], placement: Any,
                compile: Any) -> int:
    from roofline.api import generation
    from roofline.render.generation import generation_document, generation_text
    from roofline.render.serving import device_rows

    if args.plot or args.roofline_plot:
        raise RooflineError("--plot and --roofline-plot draw the steps of one batch: leave "
                            "out --input-len and --output-len, or use 'roofline serve "
                            "--plot' for requests over time")
    inputs, outputs = _lengths(args)
    with _worded_as_options():
        answers = [generation(args.spec, hardware, inputs, outputs, placement=placement,
                              compile=compile) for _, hardware in devices]
    labels = [label for label, _ in devices]
    document = generation_document(answers, labels)
    emit(args, text=generation_text(answers, labels), document=document,
         rows=device_rows(document), out=args.out)
    return 0


def _serve(args: argparse.Namespace) -> int:
    from roofline.api import (
        LatencyTarget,
        PlacementOptions,
        Scheduler,
        ServeOptions,
        build_served_curves,
        load_hardware,
        serve,
    )
    from roofline.model.llm import decoder_workload
    from roofline.render.generation import served_document, served_rows, served_text

    decoder_workload(args.spec)
    if (args.ttft is None) != (args.tpot is None):
        raise RooflineError("--ttft and --tpot make one latency target: give both (MLPerf "
                            "Server's for Llama 2 70B: --ttft 2 --tpot 0.2) or neither")
    inputs, outputs = _lengths(args)
    devices = [(hw_id, load_hardware(hw_id, args.hardware_dir)) for hw_id in args.hardware]
    placement = PlacementOptions(overlap=args.overlap, timing=StepTiming(args.timing))
    compile = compile_options_of(args)
    with _worded_as_options():
        target = None if args.ttft is None else LatencyTarget(args.ttft, args.tpot)
        scheduler = Scheduler(token_budget=args.token_budget,
                              max_sequences=args.max_sequences)
        options = ServeOptions(rate=args.rate, requests=args.requests, latency=target,
                               scheduler=scheduler, seed=args.seed,
                               workers=len(usable_cores()))
        answers = [serve(args.spec, hardware, inputs, outputs, options, placement=placement,
                         compile=compile) for _, hardware in devices]
    labels = [label for label, _ in devices]
    # The figure is drawn before any output is written: if it fails, nothing is.
    figure = (build_served_curves(answers, labels, title=answers[0].spec) if args.plot
              else None)
    document = served_document(answers, labels)
    emit(args, text=served_text(answers, labels), document=document,
         rows=served_rows(document), out=args.out)
    if figure is not None:
        save_plot(figure, args.plot)
    return 0


def _phases_roofline(answer: Any, label: str) -> Any:
    """The prefill and decode ops of the first device on its roofline, one colour each."""
    import dataclasses

    from roofline.api import build_roofline
    from roofline.render.plot import predicted_points

    points = [dataclasses.replace(point, category=step.phase.value)
              for step in (answer.prefill, answer.decode)
              for point in predicted_points(step.placement)]
    return build_roofline([answer.decode.placement.hardware], points,
                          title=f"{answer.spec}: prefill (batch {answer.prefill.batch}) "
                                f"and decode ops on {label}")


def _devices_and_output(parser: argparse.ArgumentParser) -> None:
    """The options both commands take: the devices, how each compiles, where the answer
    goes."""
    parser.add_argument("--hardware", action="append", required=True, metavar="ID",
                        help="the device (repeat to compare devices, e.g. h100-sxm and "
                             "h200)")
    parser.add_argument("--target", help="compile target (default: each hardware's own: "
                                         "its TPU, its NVIDIA GPU without one, else host); "
                                         "a sharded SPEC takes a slice big enough, or name "
                                         "one (tpu-v5e:2x4, h100-sxm:8)")
    parser.add_argument("--overlap", choices=("max", "sum"), default="max")
    parser.add_argument("--timing", choices=[timing.value for timing in StepTiming],
                        default=StepTiming.ROOFLINE.value,
                        help="a step's time: the roofline bound hand-tuned kernels "
                             "approach, as TensorRT-LLM-class serving does (default), or "
                             "as XLA:GPU runs it, from the GPU's kernel model (measured "
                             "on it, learned from DeepBench's tables, or carried from "
                             "the nearest GPU measured: the answer says which)")
    parser.add_argument("--out", metavar="FILE",
                        help="write the output to FILE instead of stdout")


def add_parsers(commands: Any, parents: Parents) -> None:
    p = commands.add_parser(
        "llm", parents=[parents.common, parents.formatted, parents.compiling],
        help="a language model served: time to first token, time per output token, "
             "tokens/s, where decode stops being memory-bound, the largest batch that fits")
    p.add_argument("spec", metavar="SPEC",
                   help="a decoder SPEC: decoder:config=llama2-7b,batch=16,prompt=512,"
                        "context=4096[,tp=8] (its batch, prompt and context are the "
                        "served ones; its phase is ignored)")
    _devices_and_output(p)
    p.add_argument("--scale", action="append", default=[], metavar="PARAM=FACTOR",
                   help="also answer on the one --hardware with these parameters scaled, "
                        "e.g. memory_bandwidth=1.5, memory_capacity=2")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw tokens/s per device against latency, batch 1 to 256 "
                        "(each batch compiled for each device)")
    p.add_argument("--roofline-plot", metavar="FILE",
                   help="also draw the prefill and decode ops on the first device's roofline")
    p.add_argument("--input-len", metavar="TOKENS",
                   help="answer for requests of this many prompt tokens (512, or a range "
                        "drawn uniformly: 128-2048), with --output-len: the batch's "
                        "prefill and every decode step at its own context")
    p.add_argument("--output-len", metavar="TOKENS",
                   help="tokens each request generates (256, or 64-512)")
    p.set_defaults(handler=_llm)

    s = commands.add_parser(
        "serve", parents=[parents.common, parents.formatted, parents.compiling],
        help="a language model serving requests by continuous batching: TTFT, TPOT and "
             "latency at p50/p90/p99, tokens/s, the highest rate within a latency target")
    s.add_argument("spec", metavar="SPEC",
                   help="a decoder SPEC (decoder:config=llama2-70b,weights=fp8,kv=fp8,"
                        "batch=64): its batch is the first of the compiled steps the "
                        "step-time model is solved from")
    _devices_and_output(s)
    s.add_argument("--input-len", required=True, metavar="TOKENS",
                   help="prompt tokens of each request: 512, or a range drawn uniformly: "
                        "128-2048")
    s.add_argument("--output-len", required=True, metavar="TOKENS",
                   help="tokens each request generates: 256, or 64-512")
    s.add_argument("--rate", type=positive_float, metavar="PER_S",
                   help="requests a second, arriving as a Poisson process (default: all "
                        "at once, an offline run)")
    s.add_argument("--requests", type=bounded_int(1, MOST_REQUESTS), default=REQUESTS,
                   metavar="N", help=f"requests simulated (default {REQUESTS})")
    s.add_argument("--ttft", type=duration_seconds, metavar="TIME",
                   help="with --tpot: find the highest rate whose p99 time to first token "
                        "and p99 time per output token meet these (seconds, or '200 ms')")
    s.add_argument("--tpot", type=duration_seconds, metavar="TIME",
                   help="p99 time per output token of the latency target")
    s.add_argument("--token-budget", type=bounded_int(1, 1_000_000), default=TOKEN_BUDGET,
                   metavar="TOKENS", help="tokens one step may hold: each decoding "
                   f"sequence's next token, then prompt chunks (default {TOKEN_BUDGET})")
    s.add_argument("--max-sequences", type=bounded_int(1, 100_000), default=MAX_SEQUENCES,
                   metavar="N", help=f"sequences one step may hold (default {MAX_SEQUENCES})")
    s.add_argument("--seed", type=bounded_int(0, 2**32 - 1), default=SEED,
                   help=f"seed of arrivals and lengths drawn (default {SEED})")
    s.add_argument("--plot", metavar="FILE",
                   help="also draw the latency-throughput curve and the Pareto frontier "
                        "over the most sequences a step holds, one line per device")
    s.set_defaults(handler=_serve)
