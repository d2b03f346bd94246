"""A packed virtualenv of this checkout, as the "Running on a cluster" recipe (docs/cluster.md) ships it.

    python -m venv --without-pip env
    pip --python env/bin/python install --no-deps reliable_kafka-*.whl   # a wheel of this checkout
    (its dependencies, pyspark and py4j left out)
    venv-pack -p env -o env.tar.gz

Executors do not need pyspark in the archive: Spark starts every Python worker with its own
``python/lib/pyspark.zip`` and py4j's zip on ``PYTHONPATH``; nor pip and setuptools, which
``--without-pip`` leaves out (7.6 MB of the archive). What is left packs to 11.3 MB here (no
bytecode, the fastest compression), 13.2 MB by the recipe (2026-11-29). The dependencies are
copied from this interpreter's site-packages, file by file as each distribution's ``RECORD``
lists them, instead of being downloaded: the same versions the tests run with, offline, in about
a second.
"""

from __future__ import annotations

import email
import importlib.metadata
import re
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import venv_pack
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
# Spark puts its own on the Python workers' path; the driver's pyspark comes with spark-submit.
NOT_SHIPPED = frozenset({"pyspark", "py4j"})
# What `pip wheel` needs of the checkout (setup.cfg names the packages and package data).
_SOURCES = ("setup.py", "setup.cfg", "README.md", "reliable_kafka", "wal")
_PIP = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q")


@dataclass(frozen=True)
class PackedVenv:
    archive: Path
    wheel: Path
    distributions: tuple[str, ...]
    seconds: float


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_requirements(wheel: Path) -> list[Requirement]:
    """The ``Requires-Dist`` of a wheel's metadata."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(name))
    return [Requirement(text) for text in metadata.get_all("Requires-Dist") or ()]


def _wanted(requirement: Requirement, extras: tuple[str, ...]) -> bool:
    """Whether ``requirement`` applies without extras or with one of ``extras``."""
    marker = requirement.marker
    return marker is None or any(marker.evaluate({"extra": extra}) for extra in ("", *extras))


def runtime_distributions(
    requirements: list[Requirement], extras: tuple[str, ...] = ()
) -> list[importlib.metadata.Distribution]:
    """What ``requirements`` need (with the package's ``extras``), recursively, as installed here,
    without :data:`NOT_SHIPPED`."""
    found: dict[str, importlib.metadata.Distribution] = {}
    # The package's extras are its own: its dependencies' requirements are read without them.
    todo = [requirement for requirement in requirements if _wanted(requirement, extras)]
    while todo:
        requirement = todo.pop()
        name = _canonical(requirement.name)
        if name in found or name in NOT_SHIPPED:
            continue
        distribution = importlib.metadata.distribution(name)
        found[name] = distribution
        todo += [r for text in distribution.requires or () if _wanted(r := Requirement(text), ())]
    return sorted(found.values(), key=lambda d: _canonical(d.metadata["Name"]))


def _copy_distribution(distribution: importlib.metadata.Distribution, site_packages: Path) -> None:
    """The distribution's files inside site-packages (its console scripts, which name this
    interpreter, are left out)."""
    for file in distribution.files or ():
        if file.parts[0] == ".." or "__pycache__" in file.parts:
            continue
        source = Path(str(distribution.locate_file(file)))
        if source.is_file():
            target = site_packages / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def build_wheel(work: Path) -> Path:
    """A wheel of this checkout (with its C extension) in ``work/wheels``."""
    source, wheels = work / "source", work / "wheels"
    for name in _SOURCES:  # built from a copy: pip's in-tree build leaves build/ and egg-info
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
    subprocess.run(
        [*_PIP, "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(wheels), str(source)],
        check=True,
    )
    (wheel,) = wheels.glob("reliable_kafka-*.whl")
    return wheel


def build_packed_venv(work: Path, extras: tuple[str, ...] = ()) -> PackedVenv:
    """``work/env.tar.gz``: a virtualenv with a wheel of this checkout and its dependencies (with
    those of its ``extras``, e.g. ``hdfs`` for checkpoints on HDFS)."""
    started = time.monotonic()
    env = work / "env"
    wheel = build_wheel(work)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    (site_packages,) = env.glob("lib/python*/site-packages")
    distributions = runtime_distributions(wheel_requirements(wheel), extras)
    for distribution in distributions:
        _copy_distribution(distribution, site_packages)
    subprocess.run(
        [*_PIP, "--python", str(env / "bin" / "python"), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    archive = work / "env.tar.gz"
    venv_pack.pack(prefix=str(env), output=str(archive), compress_level=1)
    return PackedVenv(
        archive,
        wheel,
        tuple(d.metadata["Name"] for d in distributions),
        time.monotonic() - started,
    )


def image_site_packages(work: Path, extras: tuple[str, ...] = ("hdfs",)) -> Path:
    """``work/site-packages``: what ``pip install --target site-packages 'reliable-kafka[hdfs]'
    pyspark`` lays out, offline: a wheel of this checkout, its dependencies and pyspark with py4j
    (in an image, Spark is pyspark's jars), copied from this interpreter's. The build context of
    docker/images/app/Dockerfile."""
    wheel = build_wheel(work)
    target = work / "site-packages"
    target.mkdir(parents=True, exist_ok=True)
    spark = [importlib.metadata.distribution(name) for name in sorted(NOT_SHIPPED)]
    for distribution in [*runtime_distributions(wheel_requirements(wheel), extras), *spark]:
        _copy_distribution(distribution, target)
    install = [*_PIP, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)]
    subprocess.run(install, check=True)
    return target
