"""Finding spec files: the built-in library, ``ROOFLINE_HARDWARE_PATH`` and ``--hardware-dir``.

Directories are searched in that order and a later file with the same id replaces an
earlier one, so a user can override a built-in device without editing the package.
A reference names a device as ``ID[@VARIANT][:SCOPE]`` (``tpu-v3@cloud-doc:chip``) or is
the path of a ``.toml`` file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.arguments import kind_of, path_or_text, paths
from roofline.errors import RooflineError, SpecError, UnknownHardwareError, did_you_mean, quoted
from roofline.hardware.records import Hardware, HardwareKind
from roofline.hardware.spec_file import load_spec_file

ENV_VAR = "ROOFLINE_HARDWARE_PATH"

_REF = re.compile(r"^(?P<id>[^@:]+)(?:@(?P<variant>[^@:]+))?(?::(?P<scope>[^@:]+))?$")


def builtin_dir() -> Path:
    """The spec files that ship with roofline.

    Installed wheels carry them inside the package; a source checkout (or an editable
    install) has them at the top of the repository.
    """
    packaged = Path(__file__).resolve().parents[1] / "_hardware_specs"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "hardware_specs"


def search_dirs(extra_dirs: Iterable[str | Path] = ()) -> list[Path]:
    """Built-in directory, then ``$ROOFLINE_HARDWARE_PATH`` entries, then ``extra_dirs``."""
    dirs = [builtin_dir()]
    for origin, entries in ((ENV_VAR, os.environ.get(ENV_VAR, "").split(os.pathsep)),
                            ("--hardware-dir", [str(d) for d in extra_dirs])):
        for entry in entries:
            if not entry:
                continue
            path = Path(entry).expanduser()
            if not path.is_dir():
                raise RooflineError(
                    f"{origin} names {entry!r}, which is not a directory; point it at a "
                    "directory of <id>.toml spec files"
                )
            dirs.append(path)
    return dirs


def gpu_spec_for_facts(capability: str, sms: float, memory_bytes: float) -> str | None:
    """The built-in NVIDIA spec a GPU's recorded facts describe (a trace records its
    compute capability, SM count and memory but often no name): the one with that
    capability and SM count whose memory is within 15%; None where none or several."""
    found = []
    for path in spec_files().values():
        try:
            hw = load_spec_file(path)
        except SpecError:
            continue
        if (hw.kind == HardwareKind.GPU and hw.compute_capability == capability
                and hw.count("sm") == sms
                and abs(hw.main_memory.capacity_bytes / memory_bytes - 1) <= 0.15):
            found.append(hw.id)
    return found[0] if len(found) == 1 else None


def spec_files(extra_dirs: Iterable[str | Path] = ()) -> dict[str, Path]:
    """Every spec file visible, by id (the file name without ``.toml``)."""
    found: dict[str, Path] = {}
    for directory in search_dirs(extra_dirs):
        for path in sorted(directory.glob("*.toml")):
            found[path.stem] = path
    return found


@dataclass(frozen=True)
class ParsedRef:
    """A parsed ``ID[@VARIANT][:SCOPE]`` reference (the text of :attr:`Hardware.ref`)."""

    id: str
    variant: str | None = None
    scope: str | None = None

    @classmethod
    def parse(cls, text: str) -> ParsedRef:
        match = _REF.match(text.strip())
        if match is None:
            raise UnknownHardwareError(
                f"cannot read hardware reference {text!r}; write ID, ID@VARIANT, ID:SCOPE "
                "or ID@VARIANT:SCOPE (e.g. tpu-v3@cloud-doc:chip)"
            )
        return cls(match["id"], match["variant"], match["scope"])


def load_hardware(ref: str | Path, extra_dirs: Iterable[str | Path] = ()) -> Hardware:
    """Load a device by reference (``tpu-v2``, ``tpu-v3@cloud-doc:chip``) or file path,
    searching ``extra_dirs`` (a directory or several) after the built-in specs and
    ``$ROOFLINE_HARDWARE_PATH``."""
    path_or_text("ref", ref)
    extra_dirs = paths("extra_dirs", extra_dirs)
    text = str(ref)
    if text.endswith(".toml") or os.sep in text:
        return load_spec_file(Path(text))
    parsed = ParsedRef.parse(text)
    files = spec_files(extra_dirs)
    if parsed.id not in files:
        raise UnknownHardwareError(
            f"no hardware spec with id {parsed.id!r}.{did_you_mean(parsed.id, files)} "
            + ("Measure this machine first: roofline hardware measure --out "
               "hardware_specs/host.toml. " if parsed.id == "host" else "")
            + f"Known ids: {', '.join(sorted(files))}. "
            f"Add your own with --hardware-dir DIR or ${ENV_VAR}"
        )
    return load_spec_file(files[parsed.id], variant=parsed.variant, scope=parsed.scope)


def hardware_ref(name: str, value: Any) -> Hardware | str | Path:
    """The argument ``name`` where it is a :class:`Hardware`, a spec id (``tpu-v3``) or the
    path of a spec file, unread; else a TypeError naming it."""
    if isinstance(value, Hardware):
        return value
    if not isinstance(value, (str, Path)):
        raise TypeError(f"{name} must be a Hardware, a spec id or a spec file's path, not "
                        f"{kind_of(value)} ({quoted(value)})")
    return path_or_text(name, value)


def hardware_argument(name: str, value: Any) -> Hardware:
    """:func:`hardware_ref`, a spec id or path loaded (:func:`load_hardware`)."""
    found = hardware_ref(name, value)
    return found if isinstance(found, Hardware) else load_hardware(found)


@dataclass(frozen=True)
class LibraryEntry:
    """One visible spec file: its record, or the error that kept it from loading."""

    id: str
    path: Path
    hardware: Hardware | None
    error: SpecError | None


def list_hardware(extra_dirs: Iterable[str | Path] = ()) -> list[LibraryEntry]:
    """Load every visible spec file (``extra_dirs``: a directory or several searched too);
    broken files are returned with their error."""
    extra_dirs = paths("extra_dirs", extra_dirs)
    entries = []
    for hw_id, path in sorted(spec_files(extra_dirs).items()):
        try:
            entries.append(LibraryEntry(hw_id, path, load_spec_file(path), None))
        except SpecError as exc:
            entries.append(LibraryEntry(hw_id, path, None, exc))
    return entries
