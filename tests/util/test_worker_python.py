"""Python workers default to this interpreter on local masters only, and only when unset."""

from __future__ import annotations

import logging
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from reliable_kafka.scheduler.job_scheduler import JobScheduler
from reliable_kafka.util.worker_python import (
    DAEMON_MODULE,
    DAEMON_MODULE_KEY,
    WorkerPackageMissingError,
    default_daemon_module,
    default_workers_to_this_python,
    missing_package_message,
    report_missing_package,
)


class FakeSparkContext:
    def __init__(self, master: str, conf: dict[str, str] | None = None) -> None:
        self.master = master
        self._conf = conf or {}
        self.pythonExec = "python3"

    def getConf(self) -> Any:
        return self._conf


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local-cluster[2,2,1024]"])
def test_local_masters_run_workers_on_this_interpreter(
    master: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    sc = FakeSparkContext(master)
    with caplog.at_level(logging.INFO, logger="reliable_kafka.util.worker_python"):
        assert default_workers_to_this_python(sc)
    assert sc.pythonExec == sys.executable
    assert sys.executable in caplog.text
    assert not default_workers_to_this_python(sc)  # once


@pytest.mark.parametrize("master", ["yarn", "spark://h:7077", "k8s://https://h:443"])
def test_cluster_masters_are_left_alone(master: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    sc = FakeSparkContext(master)
    assert not default_workers_to_this_python(sc)
    assert sc.pythonExec == "python3"


def test_a_python_the_user_chose_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/py/bin/python")
    assert not default_workers_to_this_python(FakeSparkContext("local[2]"))
    monkeypatch.delenv("PYSPARK_PYTHON")
    chosen = FakeSparkContext("local[2]", {"spark.pyspark.python": "/opt/py/bin/python"})
    assert not default_workers_to_this_python(chosen)
    assert chosen.pythonExec == "python3"


# What a task failure looks like from the driver: the worker's traceback inside the Py4J text.
_WORKER_TRACE = (
    "An error occurred while calling o123.collectAndServe.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 "
    "times, most recent failure: Lost task 0.3 in stage 3.0 (TID 9) (10.0.0.7 executor 1): "
    "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
    '  File "/opt/spark/python/lib/pyspark.zip/pyspark/serializers.py", line 471, in loads\n'
    "    return cloudpickle.loads(obj, encoding=encoding)\n"
    "ModuleNotFoundError: No module named '{module}'\n"
)


@pytest.mark.parametrize("module", ["reliable_kafka", "reliable_kafka.receiver.kafka_receiver", "msgpack"])
def test_cluster_master_worker_without_the_package_names_the_fix(module: str) -> None:
    message = missing_package_message("spark://master:7077", _WORKER_TRACE.format(module=module))
    assert message is not None
    assert repr(module.split(".")[0]) in message
    assert "install reliable-kafka on the executors" in message.lower()
    assert "spark.pyspark.python" in message


@pytest.mark.parametrize(
    ("master", "module"),
    [("local[2]", "reliable_kafka"), ("local-cluster[2,1,1024]", "msgpack"), ("yarn", "numpy")],
)
def test_local_masters_and_other_modules_get_no_hint(master: str, module: str) -> None:
    assert missing_package_message(master, _WORKER_TRACE.format(module=module)) is None


def test_only_the_first_failure_of_a_context_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    sc = FakeSparkContext("yarn")
    first = RuntimeError(_WORKER_TRACE.format(module="reliable_kafka"))
    with caplog.at_level(logging.ERROR, logger="reliable_kafka.util.worker_python"):
        clear = report_missing_package(sc, first)
        again = report_missing_package(sc, RuntimeError(_WORKER_TRACE.format(module="msgpack")))
    assert isinstance(clear, WorkerPackageMissingError)
    assert clear.__cause__ is first
    assert again is None
    assert [r.getMessage() for r in caplog.records] == [str(clear)]
    assert report_missing_package(FakeSparkContext("yarn"), RuntimeError("some other failure")) is None


def test_a_batch_job_failing_on_the_missing_package_reaches_await_termination_as_the_clear_error() -> None:
    notified: list[BaseException] = []
    ssc = SimpleNamespace(sparkContext=FakeSparkContext("spark://master:7077"), notify_error=notified.append)
    scheduler = SimpleNamespace(ssc=ssc)  # report_error reads nothing else
    first = RuntimeError(_WORKER_TRACE.format(module="reliable_kafka"))
    second = RuntimeError(_WORKER_TRACE.format(module="reliable_kafka"))
    JobScheduler.report_error(scheduler, "Error running job", first)  # type: ignore[arg-type]
    JobScheduler.report_error(scheduler, "Error running job", second)  # type: ignore[arg-type]
    assert isinstance(notified[0], WorkerPackageMissingError) and notified[0].__cause__ is first
    assert notified[1] is second


class _ConfRecorder:
    def __init__(self) -> None:
        self.set: dict[str, str] = {}

    def __call__(self, sc: Any, key: str, value: str) -> bool:
        self.set[key] = value
        sc._conf[key] = value
        return True


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4,2]"])
def test_local_masters_fork_workers_from_the_preimporting_daemon(
    master: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _ConfRecorder()
    monkeypatch.setattr("reliable_kafka.util.worker_python.set_driver_conf", recorder)
    sc = FakeSparkContext(master)
    assert default_daemon_module(sc)
    assert recorder.set == {DAEMON_MODULE_KEY: DAEMON_MODULE}
    assert not default_daemon_module(sc)  # set now: once


@pytest.mark.parametrize(
    ("master", "conf"),
    [
        # Executors in JVMs of their own read their SparkConf at start: too late to set here.
        ("local-cluster[2,2,1024]", {}),
        ("spark://h:7077", {}),
        ("yarn", {}),
        ("local[2]", {DAEMON_MODULE_KEY: "my.daemon"}),  # the user's choice stays
        ("local[2]", {"spark.python.use.daemon": "false"}),  # no daemon to choose
    ],
)
def test_the_daemon_module_is_left_alone(
    master: str, conf: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = _ConfRecorder()
    monkeypatch.setattr("reliable_kafka.util.worker_python.set_driver_conf", recorder)
    assert not default_daemon_module(FakeSparkContext(master, dict(conf)))
    assert recorder.set == {}
