"""roofline: roofline and analytical performance modeling for JAX/XLA programs.

The public surface is :mod:`roofline.api`, re-exported here: every name in ``__all__``.
Each loads on first use, so ``import roofline`` stays light and does not import JAX.
"""

from typing import TYPE_CHECKING, Any

from roofline.api import __all__

if TYPE_CHECKING:
    from roofline.api import *  # noqa: F403  (type checkers see the public names here)


def __getattr__(name: str) -> Any:
    if name in __all__:
        from roofline import api

        return getattr(api, name)
    raise AttributeError(f"module 'roofline' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
