"""What a finished sweep holds: its gathered model table, one hardware and target of it,
and what its rows leave out."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError
from roofline.input_files import SWEEP_TABLE, read_optional_input
from roofline.studies.sweep import MODELS_FILE

# The columns every reader of a sweep's models table relies on (see run_task).
COLUMNS = ("spec", "family", "target", "hardware", "status")


def read_models(out: str | Path) -> Any:
    """The gathered ``models.parquet`` of a finished sweep, as a DataFrame."""
    import pandas

    path = Path(out) / MODELS_FILE
    data = read_optional_input(path, SWEEP_TABLE)
    if data is None:
        raise RooflineError(f"{path} does not exist: run 'roofline sweep ... --out {out}' "
                            "to completion first")
    try:
        models = pandas.read_parquet(io.BytesIO(data))
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise RooflineError(f"{path}: not a readable sweep table ({type(exc).__name__}); "
                            f"run the sweep again with --out {out} to gather it anew"
                            ) from None
    missing = [column for column in COLUMNS if column not in models.columns]
    if missing:
        raise RooflineError(f"{path} is not a sweep table: it has no column "
                            f"{', '.join(map(repr, missing))}; run the sweep again with "
                            f"--out {out} to gather it anew")
    if models.empty:
        raise RooflineError(f"{path} holds no models: the sweep ran nothing")
    return models


def select_models(out: str | Path, hardware: str | None, target: str | None, *,
                  first_by_default: bool = False) -> tuple[Any, list[str]]:
    """The sweep's models for one hardware and target, and notes on what was chosen: where
    the sweep has several and none is named, the first in the sweep's order with
    ``first_by_default``, an error otherwise."""
    path = Path(out) / MODELS_FILE
    models = read_models(out)
    for column, value in (("hardware", hardware), ("target", target)):
        if value is not None:
            models = models[models[column] == value]
    if models.empty:
        raise RooflineError(f"{path} has no models for hardware {hardware!r} and target "
                            f"{target!r}")
    notes = []
    for column in ("hardware", "target"):
        choices = list(dict.fromkeys(models[column]))
        if len(choices) > 1:
            if not first_by_default:
                raise RooflineError(f"{path} holds several {column}s ({', '.join(choices)}): "
                                    f"choose one with --{column}")
            notes.append(f"the sweep has {len(choices)} {column}s ({', '.join(choices)}): "
                         f"showing {choices[0]}; choose another with --{column}")
            models = models[models[column] == choices[0]]
    return models, notes


def coverage_line(out: str | Path) -> str:
    """One line on what the sweep's model rows leave out."""
    from roofline.model.coverage import HEADLINE_SHARE

    models = read_models(out)
    if "left_out_flops_share" not in models:
        return "coverage: no model was placed"
    worst = models[["left_out_flops_share", "left_out_time_share"]].max(axis=1)
    leaky = models[worst > HEADLINE_SHARE]
    if leaky.empty:
        return ("coverage: no model row leaves out more than 1% of its FLOPs or time (column "
                "left_out)")
    reasons = sorted({r for text in leaky["left_out"] for r in text.split("; ") if r})
    return (f"LEFT OUT: {len(leaky)} of {len(models)} model rows leave out more than 1% of "
            f"their FLOPs or time (columns left_out*): " + "; ".join(reasons[:5]))
