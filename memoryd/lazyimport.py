"""A module imported on its first use, for the heavy libraries an idle daemon never needs.

`np = LazyModule("numpy", globals(), "np")` stands in for `import numpy as np`: the first
attribute read imports numpy and puts the real module in the importer's globals under the
same name, so every later `np.x` is a plain global lookup. Type checkers see the real import
(write it under `if TYPE_CHECKING:`, with this in the `else:` branch).
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    def __init__(self, name: str, namespace: dict[str, Any], alias: str) -> None:
        self._name = name
        self._namespace = namespace
        self._alias = alias

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._name)
        self._namespace[self._alias] = module
        return getattr(module, attr)
