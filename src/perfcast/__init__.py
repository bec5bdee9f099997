"""perfcast: forecast the performance of ML workloads on hardware you do not own."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__"]


def _lazy_exports(package: str, exports: Mapping[str, tuple[str, ...]]
                  ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's `__getattr__` and `__dir__` (PEP 562) that import its public names on first
    use: `exports` maps a submodule (relative to `package`, or a full `perfcast.` path for a
    name the package re-exports from another) to the names it provides. A name, once
    loaded, is set on the package, so `vars(package)` holds it from then on."""
    where = {name: module if module.startswith("perfcast.") else f"{package}.{module}"
             for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
