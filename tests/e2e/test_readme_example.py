"""The docs' first application (docs/getting-started.md, "A first application"; the README's
"Using it" example before the docs site), run as written against a local cluster.

Only what the page says is the reader's own is replaced: the ZooKeeper quorum and the checkpoint
directory. The app runs in its own process, as ``python app.py`` would (a local master), and is
stopped by SIGTERM with ``stopGracefullyOnShutdown`` set through the environment, as a service
manager would stop it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from reliable_kafka.local import LocalCluster
from reliable_kafka.util.librdkafka_log import with_logger
from tests.e2e.app_process import Output, start_app
from tests.e2e.console import noise
from tests.e2e.readme_app import README_CHECKPOINT, README_QUORUM, readme_example

pytestmark = pytest.mark.integration


@pytest.mark.brokers("3.9", "0.9")
def test_the_readme_example_runs_as_written(tmp_path: Path, kafka_version: str) -> None:
    """On 0.9 too: the example sets no protocol key, the receiver reads the broker's version."""
    process, console, _ = run_readme_example(tmp_path, kafka_version, stop=signal.SIGTERM)
    # The graceful stop passes SIGTERM on once it is done.
    assert process.returncode in (0, -signal.SIGTERM), console[-4000:]
    assert noise(console, spark_startup=True) == [], console[-4000:]
    # Spark's console progress bar (a receiver's job is a stage that never ends) is off.
    assert "[Stage " not in console, console[-4000:]
    # The status page's address, once, where the user sees it.
    assert console.count("Streaming status page at http://") == 1, console[-4000:]


@pytest.mark.brokers("3.9")
def test_ctrl_c_stops_the_readme_example_in_a_few_lines(tmp_path: Path, kafka_version: str) -> None:
    """Ctrl-C (SIGINT to the terminal's process group) used to print a KeyboardInterrupt
    traceback and each receiver's cancelled job with ~50 Java stack lines: pyspark's handler
    cancels every job, receivers included. It now stops as SIGTERM does, in a few lines."""
    process, console, after = run_readme_example(tmp_path, kafka_version, stop=signal.SIGINT)
    assert process.returncode == 130, console[-4000:]
    assert noise(console, spark_startup=True) == [], console[-4000:]
    # Besides the batches the graceful stop still prints (pprint's lines).
    pprint = ("---", "Time: ", "(")
    printed = [line for line in after.splitlines() if line.strip() and not line.startswith(pprint)]
    assert printed[0].startswith("Ctrl-C: stopping the streaming context gracefully"), after
    assert len(printed) <= 5, after


def run_readme_example(
    tmp_path: Path, kafka_version: str, *, stop: signal.Signals
) -> tuple[subprocess.Popen[str], str, str]:
    """The example run until a batch counts a word, then sent ``stop``; its console, whole and
    from the signal on."""
    code = readme_example()
    assert README_QUORUM in code and README_CHECKPOINT in code
    with LocalCluster(tmp_path / "cluster", kafka=kafka_version) as cluster:
        cluster.create_topic("words", partitions=2)
        app = tmp_path / "app.py"
        app.write_text(
            code.replace(README_QUORUM, cluster.zookeeper_connect).replace(
                README_CHECKPOINT, str(tmp_path / "checkpoint")
            ),
            encoding="utf-8",
        )
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            # What the README asks of the executors' interpreter.
            "PYSPARK_PYTHON": sys.executable,
            "RELIABLE_KAFKA_JOBS__STOP_GRACEFULLY_ON_SHUTDOWN": "true",
            # This machine's host name resolves to loopback, which Spark warns about (and says to
            # set this): a fact of the machine, not of the example.
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        process, output = start_app([sys.executable, str(app)], tmp_path, env)
        signalled_at = 0
        try:
            counted = produce_until_counted(cluster, process, output)
        finally:
            signalled_at = len(output.text())
            if stop == signal.SIGINT:
                os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
            else:
                process.send_signal(stop)
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    console = output.text()
    assert counted, console[-4000:]
    return process, console, console[signalled_at:]


def produce_until_counted(cluster: LocalCluster, process: subprocess.Popen[str], output: Output) -> bool:
    """auto.offset.reset is largest: lines count once the stream runs, so keep producing until one
    batch prints the word."""
    producer = Producer(with_logger({**cluster.client_config(), "linger.ms": 5}))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        if "('reliable', " in output.text():
            return True
        if "Time: " in output.text():
            producer.produce("words", b"reliable kafka reliable")
            producer.flush(10)
        time.sleep(1)
    return False
