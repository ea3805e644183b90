"""Every RPC method module. Importing this package registers them all.

Each module in this folder registers its methods with `@rpc_method`; modules are found by
name, so adding a feature's methods means adding one file here.
"""

from __future__ import annotations

import importlib
import pkgutil

for _module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    importlib.import_module(f"{__name__}.{_module.name}")
