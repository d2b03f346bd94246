"""The ``reliable-kafka`` command as the tests run it: the console script an operator runs, and the
``-X`` options that give its clients the settings a 0.9 broker needs."""

from __future__ import annotations

import sys
from pathlib import Path

from reliable_kafka.local.cluster import KAFKA_09_CLIENT_CONFIG

X_OPTIONS = [arg for key, value in KAFKA_09_CLIENT_CONFIG.items() for arg in ("-X", f"{key}={value}")]


def console_script() -> list[str]:
    """``reliable-kafka`` as an operator runs it (the venv's script, else the module)."""
    script = Path(sys.executable).with_name("reliable-kafka")
    return [str(script)] if script.exists() else [sys.executable, "-m", "reliable_kafka.cli"]
