"""``reliable-kafka-local up`` with topics and fixed ports, and LocalCluster's clean-up at exit."""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.cli import build_parser
from reliable_kafka.local.ports import free_port
from tests.e2e.kill_harness import REPO_ROOT
from tests.support import wait_until


def test_up_takes_repeated_topics_and_fixed_ports() -> None:
    args = build_parser().parse_args(
        ["up", "--topic", "events:4", "--topic", "logs", "--zookeeper-port", "2181", "--kafka-port", "9092"]
    )
    assert args.topics == [("events", 4), ("logs", 1)]
    assert (args.zookeeper_port, args.kafka_port) == (2181, 9092)
    defaults = build_parser().parse_args(["up"])
    assert (defaults.topics, defaults.zookeeper_port, defaults.kafka_port) == (None, None, None)


@pytest.mark.parametrize(
    "bad", [["--topic", "events:0"], ["--topic", "events:x"], ["--topic", ":3"], ["--kafka-port", "70000"]]
)
def test_up_refuses_bad_topics_and_ports(bad: list[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["up", *bad])


def _child_env(tmp_path: Path) -> dict[str, str]:
    # The cluster's temp dir goes under tmp_path, where the test can see whether it is left behind.
    return {**os.environ, "TMPDIR": str(tmp_path)}


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.integration
@pytest.mark.brokers("3.9")
def test_up_creates_topics_on_fixed_ports_prints_a_snippet_and_cleans_up_on_ctrl_c(tmp_path: Path) -> None:
    zookeeper_port, kafka_port = free_port(), free_port()
    command = [sys.executable, "-m", "reliable_kafka.local.cli", "up", "--topic", "events:3"]
    command += ["--zookeeper-port", str(zookeeper_port), "--kafka-port", str(kafka_port)]
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=_child_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with _reaped(process):
        assert process.stdout is not None
        lines = []
        for line in process.stdout:  # up to the snippet's last line: the cluster is up and the topic made
            lines.append(line.rstrip("\n"))
            if line.startswith("stream = KafkaUtils.createStream("):
                break
        output = "\n".join(lines)
        assert f"zookeeper.connect=127.0.0.1:{zookeeper_port}" in lines, output
        assert f"bootstrap.servers=127.0.0.1:{kafka_port}" in lines, output
        assert "topic=events partitions=3" in lines, output
        snippet = "\n".join(lines[lines.index("from reliable_kafka import KafkaUtils") :])
        ast.parse(snippet)  # ready to paste: valid Python
        assert f"'bootstrap.servers': '127.0.0.1:{kafka_port}'" in snippet
        assert (
            f"KafkaUtils.createStream(ssc, '127.0.0.1:{zookeeper_port}', 'my-group', {{'events': 1}}"
            in snippet
        )

        metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{kafka_port}"}).list_topics(timeout=30)
        assert len(metadata.topics["events"].partitions) == 3

        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert not list(tmp_path.glob("reliable-kafka-*")), "the cluster's dir was left behind"


_EXIT_WITHOUT_STOP = """
from reliable_kafka.local import LocalCluster

with LocalCluster() as stopped:  # the context manager still stops it, and a second stop is harmless
    pass
stopped.stop()
assert not stopped.work_dir.exists()
cluster = LocalCluster().start()
print(cluster.work_dir, cluster.broker._server.pid, cluster.zookeeper._server.pid, flush=True)
# exits without cluster.stop()
"""


@pytest.mark.integration
@pytest.mark.brokers("3.9")
def test_a_cluster_never_stopped_leaves_no_dir_and_no_server_at_exit(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _EXIT_WITHOUT_STOP],
        cwd=REPO_ROOT,
        env=_child_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    work_dir, *pids = result.stdout.split()
    assert Path(work_dir).parent == tmp_path
    assert not Path(work_dir).exists()
    assert not list(tmp_path.glob("reliable-kafka-*"))
    assert all(_dead(int(pid)) for pid in pids)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kafka": "4", "zookeeper_port": 2181}, "KRaft mode: it has no ZooKeeper port"),
        ({"kafka_port": 0}, "kafka_port must be 1-65535"),
        ({"zookeeper_port": 9092, "kafka_port": 9092}, "cannot both listen on port 9092"),
    ],
)
def test_local_cluster_refuses_impossible_ports_before_making_a_dir(
    kwargs: dict[str, object], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(ValueError, match=message):
        LocalCluster(**kwargs)  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())


def test_up_takes_storage_servers() -> None:
    args = build_parser().parse_args(["up", "--hdfs", "--s3", "--yarn"])
    assert (args.hdfs, args.s3, args.yarn) == (True, True, True)
    bare = build_parser().parse_args(["up"])
    assert (bare.hdfs, bare.s3, bare.yarn) == (False, False, False)


@contextlib.contextmanager
def _reaped(process: subprocess.Popen[str]) -> Iterator[None]:
    """Kills ``process`` on the way out if the test left it running (a failed assertion)."""
    try:
        yield
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _start_up_s3(tmp_path: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "reliable_kafka.local.cli", "up", "--s3"]
    return subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=_child_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _interrupt_up_s3(
    tmp_path: Path, until: str, before_ctrl_c: Callable[[list[str]], None] = lambda _: None
) -> tuple[list[str], int, str, str]:
    """Runs ``up --s3`` until a line starts with ``until``, calls ``before_ctrl_c`` with the lines
    so far, then Ctrl-C: (those lines, exit code, the rest of stdout, stderr)."""
    process = _start_up_s3(tmp_path)
    with _reaped(process):
        assert process.stdout is not None
        lines = []
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith(until):
                break
        before_ctrl_c(lines)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    return lines, process.returncode, stdout, stderr


@pytest.mark.integration
@pytest.mark.brokers("3.9")
def test_up_with_s3_prints_spark_settings_but_not_the_secret(tmp_path: Path) -> None:
    secrets = []

    def check_settings(lines: list[str]) -> None:
        conf_line = next(line for line in lines if line.startswith("spark-defaults lines"))
        conf = Path(conf_line.rsplit(": ", 1)[1])
        settings = dict(line.split(" ", 1) for line in conf.read_text().splitlines())
        secrets.append(settings["spark.hadoop.fs.s3a.secret.key"])
        assert oct(conf.stat().st_mode & 0o777) == "0o600"
        assert "spark.hadoop.fs.s3a.secret.key=(in the file below)" in lines
        assert any(line.startswith("spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:") for line in lines)

    # The last line ``up`` prints: only after it is Ctrl-C the normal stop.
    lines, returncode, stdout, stderr = _interrupt_up_s3(tmp_path, "Ctrl-C stops", check_settings)
    assert returncode == 0, stderr
    assert secrets and secrets[0] not in "\n".join(lines) + stdout + stderr
    assert not list(tmp_path.glob("reliable-kafka-*")), "the servers' dir was left behind"


def _children_running(pid: int, name: str) -> bool:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    for child in children:
        with contextlib.suppress(OSError):
            if name in Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace"):
                return True
    return False


@pytest.mark.integration
@pytest.mark.brokers("3.9")
def test_ctrl_c_while_up_is_starting_stops_what_started(tmp_path: Path) -> None:
    """Ctrl-C while S3 (the last server) starts: no traceback, exit 130, nothing left."""
    process = _start_up_s3(tmp_path)
    with _reaped(process):
        # weed's process exists seconds before it answers: up is inside its start-up then.
        wait_until(lambda: _children_running(process.pid, "weed"), timeout_s=120, what="S3 to be starting")
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    assert "Ctrl-C stops" not in stdout
    assert not list(tmp_path.glob("reliable-kafka-*")), "the servers' dir was left behind"
