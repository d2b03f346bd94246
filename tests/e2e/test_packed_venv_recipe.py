"""The packed-virtualenv recipe of docs/cluster.md makes its environment without pip and
setuptools, as ``tests/e2e/packed_venv.py`` does (issue 42, item 5: they were 7.6 MB of the
recipe's 20.8 MB archive, where the page said 11 MB). Runs the recipe's own ``venv`` line."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def recipe() -> list[str]:
    """The commands of the bash block under "Shipping the package", comments dropped."""
    page = (REPO / "docs" / "cluster.md").read_text()
    section = page.split("## Shipping the package", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, "no bash block in the section"
    return [line.split("#", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_recipes_environment_ships_neither_pip_nor_setuptools(tmp_path: Path) -> None:
    (make,) = [line for line in recipe() if " -m venv " in line]
    command = shlex.split(make)
    assert command[0] == "python3"
    subprocess.run([sys.executable, *command[1:]], cwd=tmp_path, check=True, timeout=120)
    (site_packages,) = (tmp_path / "app-env").glob("lib/python*/site-packages")
    shipped = sorted(path.name for path in site_packages.iterdir())
    assert not [name for name in shipped if name.startswith(("pip", "setuptools", "_distutils_hack"))], (
        shipped
    )
    # Nothing runs the environment's own pip, which it does not have: the pip at hand installs into it.
    pips = [line for line in recipe() if re.match(r"\S*pip ", line) and not line.startswith("pip wheel")]
    assert pips and all(
        line.startswith("pip --python app-env/bin/python ") or line.startswith("pip install venv-pack")
        for line in pips
    ), pips
