"""The package's layering, kept by tests: no stage imports a later one, nothing walks back up
through the context, and the ZooKeeper wing imports light.

Stages, earliest first: ``wal`` (standalone), ``util``, ``rpc``, ``storage``, ``settings``,
``checkpoint``, ``receiver``, ``scheduler``, ``dstream``, ``kafka``, ``ui``, ``context`` (the
composition root: it builds the parts and hands each its collaborators), ``tools`` (the
local-cluster CLI, the examples). Later stages see earlier ones through typed protocols
(``dstream.streaming_context``, ``scheduler.streaming_context``, ``scheduler.receiver_input``).

Run as a script to print the graph between stages: ``python tests/test_import_graph.py``.
"""

from __future__ import annotations

import ast
import collections
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAGES = (
    "wal",
    "util",
    "rpc",
    "storage",
    "settings",
    "checkpoint",
    "receiver",
    "scheduler",
    "dstream",
    "kafka",
    "ui",
    "context",
    "tools",
)
# Top-level modules of reliable_kafka that are not a package named after their stage.
_MODULE_STAGES = {
    "checkpoint_remote": "checkpoint",
    "state_checkpoint": "checkpoint",
    "local": "tools",
    "cli": "tools",
    "examples": "tools",
}


@dataclass(frozen=True)
class Import:
    module: str
    imported: str
    line: int


def stage_of(module: str) -> str | None:
    """The stage of a module of ours; None for other packages and the package root."""
    parts = module.split(".")
    if parts[0] == "wal":
        return "wal"
    if parts[0] != "reliable_kafka" or len(parts) == 1:
        return None
    return _MODULE_STAGES.get(parts[1], parts[1])


def our_modules() -> dict[str, Path]:
    paths = sorted([*(REPO / "reliable_kafka").rglob("*.py"), *(REPO / "wal").rglob("*.py")])
    modules = {}
    for path in paths:
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def imports_of(module: str, path: Path) -> list[Import]:
    """Every import in the module: at the top, in functions, and under ``TYPE_CHECKING`` (a type
    from a later stage is a dependency on it too)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.append(Import(module, base, node.lineno))
    return found


def all_imports() -> list[Import]:
    return [found for module, path in our_modules().items() for found in imports_of(module, path)]


def later_stage_imports() -> list[Import]:
    backwards = []
    for found in all_imports():
        source, target = stage_of(found.module), stage_of(found.imported)
        if source is not None and target is not None and STAGES.index(target) > STAGES.index(source):
            backwards.append(found)
    return backwards


def walks_through_the_context() -> list[str]:
    """``ssc.scheduler...`` or ``job_scheduler.ssc...`` outside the context: a part reaching the
    collaborators of another through the context instead of being handed them."""
    walks = []
    for module, path in our_modules().items():
        if module == "reliable_kafka.context":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name | ast.Attribute):
                continue
            owner = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
            if (owner.lstrip("_") == "ssc" and node.attr == "scheduler") or (
                owner.lstrip("_") == "job_scheduler" and node.attr == "ssc"
            ):
                walks.append(f"{module}:{node.lineno}: {owner}.{node.attr}")
    return walks


def test_every_module_belongs_to_a_stage() -> None:
    unplaced = [m for m in our_modules() if m not in ("reliable_kafka",) and stage_of(m) not in STAGES]
    assert not unplaced, f"modules outside the stages (add them to STAGES or _MODULE_STAGES): {unplaced}"


def test_no_stage_imports_a_later_one() -> None:
    backwards = [f"{i.module}:{i.line} imports {i.imported}" for i in later_stage_imports()]
    assert not backwards, "imports from a stage to a later one:\n" + "\n".join(backwards)


def test_no_part_walks_through_the_context() -> None:
    walks = walks_through_the_context()
    assert not walks, "reached through the context instead of handed in:\n" + "\n".join(walks)


def test_the_rules_see_a_backward_import(tmp_path: Path) -> None:
    # The checks above pass on an empty graph too: show they find what they look for.
    module = tmp_path / "scheduler_module.py"
    module.write_text(
        "from reliable_kafka.context import StreamingContext\n"
        "def f(ssc):\n    return ssc.scheduler.receiver_tracker\n"
    )
    found = imports_of("reliable_kafka.scheduler.scheduler_module", module)
    assert [(i.imported, i.line) for i in found] == [("reliable_kafka.context", 1)]
    assert stage_of(found[0].imported) == "context"
    assert STAGES.index("context") > STAGES.index("scheduler")


def test_the_zookeeper_wing_imports_no_spark_rpc_wal_or_pydantic() -> None:
    probe = (
        "import sys, reliable_kafka.kafka.client.zk.paths\n"
        "heavy = ('pyspark', 'reliable_kafka.rpc', 'wal', 'pydantic')\n"
        "print('\\n'.join(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert not loaded, f"importing reliable_kafka.kafka.client.zk.paths loaded {loaded}"


def main() -> None:
    """Prints how many imports go from each stage to each other, then any rule broken."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    sizes: collections.Counter[str] = collections.Counter()
    for module, path in our_modules().items():
        stage = stage_of(module)
        if stage is not None:
            sizes[stage] += len(path.read_text().splitlines())
    for found in all_imports():
        source, target = stage_of(found.module), stage_of(found.imported)
        if source is not None and target is not None and source != target:
            counts[source, target] += 1
    print("imports between stages (rows import columns; a stage imports only those left of it):")
    print(f"{'':>11}" + "".join(f"{stage[:6]:>7}" for stage in STAGES) + "   lines")
    for source in STAGES:
        row = "".join(f"{counts[source, target] or '.':>7}" for target in STAGES)
        print(f"{source:>11}{row}{sizes[source]:>8}")
    backwards, walks = later_stage_imports(), walks_through_the_context()
    print(f"imports from a stage to a later one: {len(backwards)}")
    for found in backwards:
        print(f"  {found.module}:{found.line} imports {found.imported}")
    print(f"walks through the context: {len(walks)}")
    for walk in walks:
        print(f"  {walk}")


if __name__ == "__main__":
    main()
