"""Built-in scheduler plugins: every module in this package is imported, which registers its plugins."""

import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_info.name}")
