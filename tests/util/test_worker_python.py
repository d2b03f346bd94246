"""Python workers default to this interpreter on local masters only, and only when unset."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

from reliable_kafka.util.worker_python import default_workers_to_this_python


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
