"""Text tables, JSON and CSV, and the lines that say what a result leaves out: the
formats every command prints."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

FORMATS = ("table", "json", "csv")


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
                 title: str | None = None, right: Sequence[str] = ()) -> str:
    """A plain fixed-width table; numbers (and the ``right`` columns: quantities with
    units) are right-aligned, text left-aligned."""
    columns = list(columns or (rows[0].keys() if rows else []))
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    numeric = [c in right or all(_is_number(row.get(c)) for row in rows
                                 if row.get(c) is not None) for c in columns]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [title] if title else []
    out += [line(columns), line(["-" * w for w in widths])]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def clipped(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters for a table cell or a label, ``...`` marking the
    cut."""
    return text if len(text) <= width else text[:width - 3] + "..."


def to_json(document: Mapping[str, Any]) -> str:
    """Strict JSON: a value that is not a finite number (an infinite ratio, say) is
    written as null, never as the ``Infinity`` or ``NaN`` JSON does not have."""
    return json.dumps(_finite(document), indent=2, sort_keys=False, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def to_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    columns = list(columns or (rows[0].keys() if rows else []))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore",
                            lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: ";".join(map(str, v)) if isinstance(v, (list, tuple)) else v
                         for c, v in row.items()})
    return buffer.getvalue()


def _gap_line(gap: dict[str, Any]) -> str:
    """A left-out gap's shares are the work missing from the total; an approximated gap's
    are those of the whole ops it touches, so its line says the ops take them."""
    count, ops = gap["op_count"], gap["ops"]
    flops, seconds = f"{gap['flops_share']:.1%}", f"{gap['time_share']:.1%}"
    if gap["leaves_out"]:
        head = (f"LEFT OUT ({gap['gap']}): {count} op{'s' if count != 1 else ''}, "
                f"{flops} of FLOPs, {seconds} of time")
    else:
        head = (f"approximated ({gap['gap']}) in {count} op{'s' if count != 1 else ''} that "
                f"do{'es' if count == 1 else ''} {flops} of FLOPs and take"
                f"{'s' if count == 1 else ''} {seconds} of time")
    return f"{head}: {gap['detail']} [{', '.join(ops[:3])}{', ...' if count > 3 else ''}]"


def coverage_headline(document: dict[str, Any]) -> list[str]:
    """The first lines of a report: every gap over 1% of the time or FLOPs."""
    return [_gap_line(gap) for gap in document["gaps"] if gap["headline"]]


def coverage_footer(document: dict[str, Any], headlined: bool = False) -> str:
    """The closing lines: everything left out or approximated, or that nothing was; with
    ``headlined``, those the headline named already are counted, not said again."""
    gaps = document["gaps"]
    if not gaps:
        return "coverage: every op was costed, timed where measured, and placed on its own roof"
    rest = [gap for gap in gaps if not (headlined and gap["headline"])]
    named = len(gaps) - len(rest)
    head = ("what this result leaves out or approximates"
            + (f": the {'one' if named == 1 else named} named at the top" if named else "")
            + (", and:" if named and rest else ":" if rest else ""))
    return "\n".join([head, *(f"  {_gap_line(gap)}" for gap in rest)])


def with_coverage(text: str, document: dict[str, Any]) -> str:
    """``text`` with the coverage headline before it and the footer after it, each gap
    said once."""
    head = coverage_headline(document)
    body = text if text.endswith("\n") else text + "\n"
    return ("\n".join(head) + "\n\n" if head else "") + body + "\n" + coverage_footer(
        document, headlined=True) + "\n"
