"""A griffe extension: the names our packages load on first use (PEP 562 ``__getattr__`` over a
``_LAZY_EXPORTS`` / ``_EXPORTS`` table) become aliases, so that the reference names the public
import path (``reliable_kafka.kafka.KafkaUtils``) whatever module defines the class today.
Static analysis alone sees only the table, not the names.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe

_TABLES = ("_LAZY_EXPORTS", "_EXPORTS")


class LazyExports(griffe.Extension):
    def on_module_members(self, *, node: Any, mod: griffe.Module, agent: Any, **kwargs: Any) -> None:
        for table_name in _TABLES:
            table = mod.members.get(table_name)
            if table is None or getattr(table, "value", None) is None:
                continue
            try:
                exports = ast.literal_eval(str(table.value))
            except (ValueError, SyntaxError):
                continue
            for name, module in exports.items():
                if name in mod.members:
                    continue
                # A table names either the module (reliable_kafka.kafka.kafka_utils) or, relative
                # to its package, the module's last part (scheduler: "rate_estimator").
                target = module if "." in module else f"{mod.path}.{module}"
                mod.set_member(name, griffe.Alias(name, f"{target}.{name}", parent=mod))
