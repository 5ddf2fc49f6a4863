"""Hardware spec records, spec files and the spec library."""

from roofline.hardware.library import (
    ENV_VAR,
    LibraryEntry,
    ParsedRef,
    builtin_dir,
    list_hardware,
    load_hardware,
    spec_files,
)
from roofline.hardware.records import (
    DTYPES,
    Ceilings,
    ComputeRoof,
    ExecutionUnit,
    Hardware,
    HardwareKind,
    Link,
    MemoryLevel,
    Scalar,
)
from roofline.hardware.spec_file import load_spec_file, parse_spec

__all__ = [
    "DTYPES", "ENV_VAR", "Ceilings", "ComputeRoof", "ExecutionUnit", "Hardware",
    "HardwareKind", "LibraryEntry", "Link", "MemoryLevel", "ParsedRef", "Scalar", "builtin_dir",
    "list_hardware", "load_hardware", "load_spec_file", "parse_spec", "spec_files",
]
