"""ParaDnn's regression of a metric on normalized hyperparameters, over a sweep.

Each hyperparameter is put on a log2 scale (ParaDnn's grids mostly double) and
standardized (mean 0, standard deviation 1) over the models analyzed, so the least-squares
weights compare: a positive weight means the metric grows with that hyperparameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from roofline.errors import RooflineError

METRICS = ("utilization", "speedup")


def metric_table(models: pd.DataFrame, metric: str, hardware: str,
                 baseline: str | None = None, target: str | None = None) -> pd.DataFrame:
    """One row per model with the metric: FLOP/s utilization on ``hardware``, or the
    predicted speedup of ``hardware`` over ``baseline`` (same compiled program)."""
    rows = models[models["status"] == "ok"]
    if target is not None:
        rows = rows[rows["target"] == target]
    if metric == "utilization":
        table = rows[rows["hardware"] == hardware].copy()
        table["metric"] = table["utilization"]
    elif metric == "speedup":
        if baseline is None:
            raise RooflineError("the speedup metric needs --baseline HARDWARE")
        left = rows[rows["hardware"] == baseline].set_index(["spec", "target"])
        right = rows[rows["hardware"] == hardware].set_index(["spec", "target"])
        table = right.copy()
        table["metric"] = left["predicted_s"] / right["predicted_s"]
        table = table.reset_index()
    else:
        raise RooflineError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    table = table.dropna(subset=["metric"])
    if table.empty:
        raise RooflineError(_why_no_rows(models, metric, hardware, baseline, target))
    return table


def _why_no_rows(models: pd.DataFrame, metric: str, hardware: str, baseline: str | None,
                 target: str | None) -> str:
    """Why a sweep gives no value of ``metric``: a name it does not have, or models that
    were not analyzed (did not fit, failed)."""
    names = [("target", target, "--target"), ("hardware", hardware, "--hardware")]
    sides = [hardware]
    if metric == "speedup":
        names.append(("hardware", baseline, "--baseline"))
        sides.append(baseline)
    for column, value, option in names:
        held = sorted(map(str, models[column].unique()))
        if value is not None and value not in held:
            return (f"the sweep has no models for {column} {value!r} ({option}); it has "
                    f"{', '.join(held)}")
    for side in sides:
        rows = models[models["hardware"] == side]
        if target is not None:
            rows = rows[rows["target"] == target]
        if rows.empty:
            return (f"the sweep has no models for hardware {side!r} compiled for target "
                    f"{target!r}: choose another --target")
        if not (rows["status"] == "ok").any():
            counts = rows["status"].value_counts()
            return (f"none of the {len(rows)} models on {side!r} was analyzed ("
                    + ", ".join(f"{n} {status}" for status, n in counts.items())
                    + "): there is nothing to regress")
    return (f"the {metric} of every analyzed model on {hardware!r} is undefined (no FLOPs, "
            "or no common models with the baseline)")


def regression_weights(table: pd.DataFrame, parameters: Sequence[str]) -> pd.DataFrame:
    """Least-squares weights of the standardized log2 hyperparameters on ``metric``."""
    varying = [p for p in parameters if p in table and table[p].nunique() > 1
               and pd.api.types.is_numeric_dtype(table[p])]
    if not varying:
        raise RooflineError("no numeric hyperparameter varies across these models")
    x = np.log2(table[varying].astype(float).to_numpy())
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    design = np.column_stack([x, np.ones(len(x))])
    y = table["metric"].astype(float).to_numpy()
    weights, *_ = np.linalg.lstsq(design, y, rcond=None)
    fitted = design @ weights
    r2 = 1 - ((y - fitted) ** 2).sum() / max(((y - y.mean()) ** 2).sum(), 1e-30)
    result = pd.DataFrame({"parameter": varying, "weight": weights[:-1]})
    result = result.reindex(result["weight"].abs().sort_values(ascending=False).index)
    # A sweep compiled for several targets has one row per model and target.
    models = int(table["spec"].nunique()) if "spec" in table else len(y)
    targets = sorted(map(str, table["target"].unique())) if "target" in table else []
    result.attrs.update(intercept=float(weights[-1]), r2=float(r2), models=models,
                        rows=len(y), targets=targets)
    return result.reset_index(drop=True)


def regress_sweep(sweep_dir: str | Path, metric: str, hardware: str,
                  baseline: str | None = None, target: str | None = None) -> pd.DataFrame:
    """ParaDnn's regression of ``metric`` on the hyperparameters of a finished sweep (its
    family's parameters), on ``hardware`` (over ``baseline`` for ``speedup``)."""
    from roofline.program.workloads import FAMILIES
    from roofline.studies.sweep import MODELS_FILE
    from roofline.studies.sweep_results import read_models

    models = read_models(sweep_dir)
    family = str(models["family"].iloc[0])
    if family not in FAMILIES:
        raise RooflineError(f"{Path(sweep_dir) / MODELS_FILE} is a sweep of {family!r}, "
                            "a family this roofline does not have: regress it with the "
                            "roofline that ran it")
    parameters = [p.name for p in FAMILIES[family].params]
    table = metric_table(models, metric, hardware, baseline, target)
    return regression_weights(table, parameters)


def regression_document(weights: pd.DataFrame, metric: str, hardware: str,
                        baseline: str | None) -> dict[str, Any]:
    return {"schema": "roofline/regression/1", "metric": metric, "hardware": hardware,
            "baseline": baseline, "weights": weights.to_dict("records"), **weights.attrs}
