"""``spark-submit --master yarn`` as the tests run it, and what they read back from YARN.

Every application of these tests is submitted the same way (the commands docs/cluster.md shows):
the packed virtualenv through ``spark.archives`` (``--archives env.tar.gz#environment``), Spark's
own jars from pyspark's install as ``spark.yarn.jars=local:<pyspark>/jars/*`` (nothing uploaded per
application: the NodeManagers run on this host; on a real cluster, ``spark.yarn.archive`` on HDFS),
the checkpoint on the session's HDFS, containers of Spark's smallest useful sizes.

spark-submit runs without this process's ``PYTHONPATH``: Spark's YARN client passes its own
``PYTHONPATH`` on to the application master and the executors, where a checkout on it would come
ahead of the archive. In client mode the driver runs the packed environment too, unpacked here.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import signal
import subprocess
import tarfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reliable_kafka.local.hdfs import LocalHdfs
from reliable_kafka.local.spark_hosts import spark_home
from reliable_kafka.local.yarn import LocalYarn, java_home
from tests.e2e.packed_venv import PackedVenv
from tests.support import read_json_lines, wait_until
from tests.support.spark_jvm_archive import suite_properties_file

REPO = Path(__file__).resolve().parents[2]
WORDCOUNT = REPO / "reliable_kafka" / "examples" / "wordcount.py"
# YARN's final states of an application.
FINISHED = ("FINISHED", "FAILED", "KILLED")
_SUBMITTED = re.compile(r"Submitted application (application_\d+_\d+)")


def spark_yarn_conf(hdfs: LocalHdfs) -> dict[str, str]:
    """The settings every test application gets, beside its own."""
    return {
        # Spark's jars where the NodeManagers find them: no 483 MB upload per application.
        "spark.yarn.jars": f"local:{spark_home() / 'jars'}/*",
        "spark.pyspark.python": "./environment/bin/python",
        "spark.driver.memory": "512m",
        "spark.yarn.am.memory": "512m",
        "spark.executor.memory": "512m",
        # One executor, two cores: one for the receiver, one for the batches.
        "spark.executor.instances": "1",
        "spark.executor.cores": "2",
        "spark.ui.enabled": "false",
        # Python's side of HDFS (the checkpoint, the write-ahead logs) is WebHDFS.
        **hdfs.spark_conf(),
    }


@dataclass
class Submission:
    """One ``spark-submit`` run, in a session of its own, its output in ``log``."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    started: float = field(default_factory=time.monotonic)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def end(self) -> None:
        """spark-submit and whatever it started here (a client-mode driver)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)


def unpacked_driver_env(venv: PackedVenv, into: Path) -> Path:
    """The packed environment unpacked here: the client-mode driver's ``python``."""
    if not (into / "bin" / "python").exists():
        with tarfile.open(venv.archive) as archive:
            archive.extractall(into, filter="fully_trusted")  # our own archive: its links are ours
    return into / "bin" / "python"


def submit(
    yarn: LocalYarn,
    hdfs: LocalHdfs,
    venv: PackedVenv,
    *,
    name: str,
    deploy_mode: str,
    app: Path,
    app_args: list[str],
    work: Path,
    conf: Mapping[str, str | None] = {},
) -> Submission:
    """``conf`` adds to :func:`spark_yarn_conf`'s settings; a key given None is left out (Spark's
    default then)."""
    merged = {**spark_yarn_conf(hdfs), **conf}
    settings = {key: value for key, value in merged.items() if value is not None}
    if deploy_mode == "client":
        settings["spark.pyspark.driver.python"] = str(unpacked_driver_env(venv, work / "driver-env"))
        settings["spark.driver.host"] = "127.0.0.1"
    suite_properties = suite_properties_file()
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        # The session's JVM options (class-data sharing archives, C1 only), where it has them.
        *(("--properties-file", str(suite_properties)) if suite_properties else ()),
        *("--master", "yarn", "--deploy-mode", deploy_mode, "--name", name),
        *("--archives", f"{venv.archive}#environment"),
        *(part for key, value in settings.items() for part in ("--conf", f"{key}={value}")),
        str(app),
        *app_args,
    ]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(yarn.client_env())
    env["JAVA_HOME"] = str(java_home())
    # The client-mode driver's scratch space (spark-*, blockmgr-*) in the test's directory.
    env["SPARK_LOCAL_DIRS"] = str(work / "driver-local")
    log = work / f"{name}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True
        )
    return Submission(name, process, log)


def application_of(yarn: LocalYarn, submission: Submission, timeout_s: float = 180.0) -> dict[str, Any]:
    """The YARN application the submission made, as the ResourceManager reports it (its id read
    from spark-submit's "Submitted application" line: in client mode the application's own
    ``setAppName`` names it, not ``--name``)."""
    found: list[str] = []

    def submitted() -> bool:
        found[:] = _SUBMITTED.findall(submission.output())
        return bool(found) or submission.process.poll() is not None

    wait_until(submitted, timeout_s=timeout_s, what=f"spark-submit to submit {submission.name}")
    assert found, f"spark-submit exited {submission.process.returncode}:\n{submission.output()[-6000:]}"
    application = yarn.application(found[0])
    assert application is not None, f"the ResourceManager does not know {found[0]}"
    return application


def kill_application(yarn: LocalYarn, application_id: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """What ``yarn application -kill`` does (the ResourceManager's REST call for it), then its end;
    an application that already ended is left as it is."""
    if (yarn.application(application_id) or {}).get("state") not in FINISHED:
        yarn.rest(
            f"/ws/v1/cluster/apps/{application_id}/state?user.name={getpass.getuser()}",
            method="PUT",
            body={"state": "KILLED"},
        )
    final: list[dict[str, Any]] = []

    def ended() -> bool:
        final[:] = [yarn.application(application_id) or {}]
        return final[0].get("state") in FINISHED

    wait_until(ended, timeout_s=timeout_s, what=f"{application_id} to end")
    return final[0]


def read_rows(path: Path) -> list[dict[str, Any]]:
    return read_json_lines(path)


def container_text(yarn: LocalYarn, application_id: str, file: str) -> dict[str, str]:
    """Container id -> the text of its ``file`` (``stdout``, ``stderr``), on every NodeManager."""
    texts = {}
    for container, directory in yarn.container_logs(application_id).items():
        path = directory / file
        if path.is_file():
            texts[container] = path.read_text(errors="replace")
    return texts
