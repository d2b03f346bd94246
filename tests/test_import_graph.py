"""The package's layering, kept by tests: no stage imports a later one, nothing walks back up
through the context, and the ZooKeeper wing imports light.

Stages, earliest first: ``wal`` (standalone), ``util``, ``rpc``, ``storage``, ``settings``,
``checkpoint``, ``receiver``, ``scheduler``, ``dstream``, ``kafka``, ``sql`` (Structured
Streaming's ``reliable-kafka`` source, built on ``kafka``'s rooms), ``ui``, ``context`` (the
composition root: it builds the parts and hands each its collaborators), ``package`` (the
package root, ``reliable_kafka/__init__.py``: the public names, loaded lazily), ``tools`` (the
local-cluster CLI, the examples). Later stages see earlier ones through typed protocols
(``dstream.streaming_context``, ``scheduler.streaming_context``, ``scheduler.receiver_input``).

Inside ``kafka``, rooms in the order data flows: ``client`` (reaching Kafka and ZooKeeper) <
``offsets`` (the consumer group: membership and committed offsets) < ``receiver`` | ``direct``
(createStream; createDirectStream and createRDD: siblings, neither imports the other) <
``facade`` (``kafka/__init__.py`` and ``KafkaUtils``).

``from X import name`` counts as an import of the module ``X.name`` when there is one (``from
reliable_kafka import state_checkpoint``), and of the module that defines ``name`` when ``X`` is a
package that exports it lazily (``from reliable_kafka import KafkaUtils``), as well as of ``X``.

Run as a script to print the graph between stages: ``python tests/test_import_graph.py``.
"""

from __future__ import annotations

import ast
import collections
import functools
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

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
    "sql",
    "ui",
    "context",
    "package",
    "tools",
)
# Top-level modules of reliable_kafka that are not a package named after their stage.
_MODULE_STAGES = {
    "checkpoint_remote": "checkpoint",
    "checkpoint_lease": "checkpoint",
    "checkpoint_lease_files": "checkpoint",
    "versions": "util",
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


# The rooms of the kafka stage, earliest first; rooms of one rank are siblings (neither imports
# the other).
KAFKA_ROOMS = {"client": 0, "offsets": 1, "receiver": 2, "direct": 2, "facade": 3}


def stage_of(module: str) -> str | None:
    """The stage of a module of ours; None for other packages."""
    parts = module.split(".")
    if parts[0] == "wal":
        return "wal"
    if parts[0] != "reliable_kafka":
        return None
    if len(parts) == 1:
        return "package"
    return _MODULE_STAGES.get(parts[1], parts[1])


def room_of(module: str) -> str | None:
    """The room of a module of the kafka stage (its facade: the package and ``kafka_utils``)."""
    if stage_of(module) != "kafka":
        return None
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[2] in KAFKA_ROOMS else "facade"


def our_modules() -> dict[str, Path]:
    paths = sorted([*(REPO / "reliable_kafka").rglob("*.py"), *(REPO / "wal").rglob("*.py")])
    modules = {}
    for path in paths:
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


@functools.cache
def lazy_exports(path: Path) -> dict[str, str]:
    """A package's ``_LAZY_EXPORTS`` (name -> the module defining it), as its ``__getattr__`` reads it."""
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "_LAZY_EXPORTS" for target in node.targets
        ):
            return ast.literal_eval(node.value)
    return {}


def imports_of(module: str, path: Path, modules: dict[str, Path] | None = None) -> list[Import]:
    """Every import in the module: at the top, in functions, and under ``TYPE_CHECKING`` (a type
    from a later stage is a dependency on it too). ``modules`` (default: ours) resolves ``from
    package import name`` to the module behind the name."""
    modules = our_modules() if modules is None else modules
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
            exports = lazy_exports(modules[base]) if base in modules else {}
            behind = {
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else exports.get(alias.name)
                for alias in node.names
            }
            if not behind <= {f"{base}.{alias.name}" for alias in node.names}:
                found.append(Import(module, base, node.lineno))  # names of the package itself
            found += [Import(module, target, node.lineno) for target in sorted(behind - {None})]
    return found


def all_imports() -> list[Import]:
    modules = our_modules()
    return [found for module, path in modules.items() for found in imports_of(module, path, modules)]


def room_violations(imports: list[Import]) -> list[Import]:
    """Imports inside the kafka stage from a room to a later one or to a sibling."""
    wrong = []
    for found in imports:
        source, target = room_of(found.module), room_of(found.imported)
        if source is None or target is None or source == target:
            continue
        if KAFKA_ROOMS[target] >= KAFKA_ROOMS[source]:
            wrong.append(found)
    return wrong


def later_stage_imports() -> list[Import]:
    backwards = []
    for found in all_imports():
        source, target = stage_of(found.module), stage_of(found.imported)
        if source is not None and target is not None and STAGES.index(target) > STAGES.index(source):
            backwards.append(found)
    return backwards


def walks_through_the_context() -> list[str]:
    """``ssc.scheduler...``, ``job_scheduler.ssc...`` or ``job_scheduler.receiver_tracker``
    outside the context: a part reaching the collaborators of another through the context or its
    owner instead of being handed them."""
    walks = []
    for module, path in our_modules().items():
        if module == "reliable_kafka.context":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Name | ast.Attribute):
                continue
            owner = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
            if (owner.lstrip("_") == "ssc" and node.attr == "scheduler") or (
                owner.lstrip("_") == "job_scheduler" and node.attr in ("ssc", "receiver_tracker")
            ):
                walks.append(f"{module}:{node.lineno}: {owner}.{node.attr}")
    return walks


def test_every_module_belongs_to_a_stage() -> None:
    unplaced = [m for m in our_modules() if stage_of(m) not in STAGES]
    assert not unplaced, f"modules outside the stages (add them to STAGES or _MODULE_STAGES): {unplaced}"


def test_no_stage_imports_a_later_one() -> None:
    backwards = [f"{i.module}:{i.line} imports {i.imported}" for i in later_stage_imports()]
    assert not backwards, "imports from a stage to a later one:\n" + "\n".join(backwards)


def test_no_kafka_room_imports_a_later_or_sibling_room() -> None:
    wrong = [f"{i.module}:{i.line} imports {i.imported}" for i in room_violations(all_imports())]
    assert not wrong, "imports from a kafka room to a later or sibling one:\n" + "\n".join(wrong)


def test_the_package_root_is_checked() -> None:
    # `from reliable_kafka import state_checkpoint` inside the package is an import of that module.
    assert stage_of("reliable_kafka") == "package"
    imports = all_imports()
    assert any(
        i.module == "reliable_kafka.context" and i.imported == "reliable_kafka.state_checkpoint"
        for i in imports
    )


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


def test_the_rules_see_an_import_through_the_package_root(tmp_path: Path) -> None:
    module = tmp_path / "scheduler_module.py"
    module.write_text("from reliable_kafka import StreamingContext, state_checkpoint\n")
    modules = {**our_modules(), "reliable_kafka.scheduler.scheduler_module": module}
    found = imports_of("reliable_kafka.scheduler.scheduler_module", module, modules)
    assert {i.imported for i in found} == {
        "reliable_kafka",  # StreamingContext is a name of the root's, not a module under it
        "reliable_kafka.context",
        "reliable_kafka.state_checkpoint",
    }
    backwards = {stage_of(i.imported) for i in found if STAGES.index(stage_of(i.imported) or "") > 7}
    assert backwards == {"context", "package"}


def test_the_rules_see_a_room_running_back_up(tmp_path: Path) -> None:
    # An offsets module reaching the receiver room, and a direct module reaching its sibling.
    offsets_module = tmp_path / "offsets_module.py"
    offsets_module.write_text(
        "from reliable_kafka.kafka.receiver.consumer_connector import ConsumerConnector\n"
    )
    direct_module = tmp_path / "direct_module.py"
    direct_module.write_text(
        "from reliable_kafka.kafka.client.offset_range import OffsetRange\n"
        "from reliable_kafka.kafka import KafkaInputDStream\n"
    )
    modules = our_modules()
    found = [
        *imports_of("reliable_kafka.kafka.offsets.offsets_module", offsets_module, modules),
        *imports_of("reliable_kafka.kafka.direct.direct_module", direct_module, modules),
    ]
    wrong = {(room_of(i.module), i.imported) for i in room_violations(found)}
    assert wrong == {
        ("offsets", "reliable_kafka.kafka.receiver.consumer_connector"),
        ("direct", "reliable_kafka.kafka"),  # the facade
        ("direct", "reliable_kafka.kafka.receiver.kafka_input_dstream"),  # a sibling, through the facade
    }


ZOOKEEPER_MODULES = (
    "reliable_kafka.kafka.client.zk.paths",
    "reliable_kafka.kafka.client.zk.client",
    "reliable_kafka.kafka.offsets.zk.group_membership",
    "reliable_kafka.kafka.offsets.zk.offset_store",
)


@pytest.mark.parametrize("module", ZOOKEEPER_MODULES)
def test_the_zookeeper_wing_imports_no_spark_rpc_wal_settings_or_pydantic(module: str) -> None:
    probe = (
        f"import sys, {module}\n"
        "heavy = ('pyspark', 'reliable_kafka.rpc', 'reliable_kafka.settings', 'wal', 'pydantic')\n"
        "print('\\n'.join(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert not loaded, f"importing {module} loaded {loaded}"


# The Structured Streaming source is imported by a fresh Python process per query (the driver's
# reader) and by every fresh executor worker, each time before its first call: it must not pull
# in what only the DStreams need.
SOURCE_HEAVY = ("reliable_kafka.settings", "reliable_kafka.rpc", "pydantic_settings", "wal")


def test_the_structured_streaming_source_imports_no_settings_rpc_wal_or_receiver() -> None:
    pytest.importorskip("pyspark.sql.datasource")
    probe = (
        "import sys, reliable_kafka.sql.source\n"
        f"heavy = {SOURCE_HEAVY!r}\n"
        "print('\\n'.join(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy)\n"
        "    or (m.startswith('reliable_kafka.receiver.') and m != 'reliable_kafka.receiver.fatal_error')))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert not loaded, f"importing reliable_kafka.sql.source loaded {loaded}"


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
    rooms: collections.Counter[tuple[str, str]] = collections.Counter()
    for found in all_imports():
        source, target = room_of(found.module), room_of(found.imported)
        if source is not None and target is not None and source != target:
            rooms[source, target] += 1
    print("imports between the rooms of kafka/ (rows import columns):")
    print(f"{'':>11}" + "".join(f"{room[:7]:>9}" for room in KAFKA_ROOMS))
    for source in KAFKA_ROOMS:
        print(f"{source:>11}" + "".join(f"{rooms[source, target] or '.':>9}" for target in KAFKA_ROOMS))
    backwards, walks = later_stage_imports(), walks_through_the_context()
    print(f"imports from a stage to a later one: {len(backwards)}")
    for found in backwards:
        print(f"  {found.module}:{found.line} imports {found.imported}")
    wrong_rooms = room_violations(all_imports())
    print(f"imports from a kafka room to a later or sibling one: {len(wrong_rooms)}")
    for found in wrong_rooms:
        print(f"  {found.module}:{found.line} imports {found.imported}")
    print(f"walks through the context: {len(walks)}")
    for walk in walks:
        print(f"  {walk}")


if __name__ == "__main__":
    main()
