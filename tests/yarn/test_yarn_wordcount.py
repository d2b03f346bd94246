"""The README's word count (reliable_kafka/examples/wordcount.py) on YARN, client and cluster mode.

``spark-submit --master yarn`` with the packed virtualenv through ``spark.archives``; the checkpoint
and the receiver's write-ahead log on HDFS; the receiver runs in an executor's YARN container. The
example produces words for 10 s, waits until the receiver stored them all, stops gracefully and
exits 0 only if the words counted are the words produced: the application's final status says
so, and its driver's output (spark-submit's in client mode, the application master container's
stdout in cluster mode) prints it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from reliable_kafka.local import LocalCluster
from reliable_kafka.local.hdfs import LocalHdfs
from reliable_kafka.local.yarn import LocalYarn
from tests.cluster_backends import unique_name
from tests.e2e.packed_venv import PackedVenv
from tests.support import wait_until
from tests.yarn.submit import WORDCOUNT, application_of, container_text, submit

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.yarn, pytest.mark.brokers("3.9")]

COUNTED = "OK: every word produced was counted"
# The receiver's first write to its write-ahead log on HDFS says, once, that it closes each
# segment (HDFS shows a file only once closed): a line of our receiver, in its container's stderr,
# naming the log's path on HDFS.
RECEIVER_LINE = re.compile(r"WARNING wal\.file_based \[receiver 0\]: write-ahead log (\S+)/receivedData/0: ")


@pytest.mark.parametrize("deploy_mode", ["client", "cluster"])
def test_wordcount_on_yarn(
    deploy_mode: str,
    local_cluster: LocalCluster,
    local_hdfs: LocalHdfs,
    local_yarn: LocalYarn,
    yarn_packed_venv: PackedVenv,
    tmp_path: Path,
) -> None:
    topic = unique_name(f"yarn-words-{deploy_mode}")
    checkpoint = f"{local_hdfs.url}/yarn/{topic}"
    app_args = [
        *("--master", "yarn", "--zookeeper", local_cluster.zookeeper_connect),
        *("--bootstrap-servers", local_cluster.bootstrap_servers, "--topic", topic),
        *("--duration", "10", "--rate", "20", "--checkpoint", checkpoint),
    ]
    submission = submit(
        local_yarn,
        local_hdfs,
        yarn_packed_venv,
        name=topic,
        deploy_mode=deploy_mode,
        app=WORDCOUNT,
        app_args=app_args,
        work=tmp_path,
        # A failed first attempt fails the test, instead of a second attempt hiding it.
        conf={"spark.yarn.maxAppAttempts": "1"},
    )
    try:
        application = application_of(local_yarn, submission)
        app_id = application["id"]
        wait_until(lambda: submission.process.poll() is not None, timeout_s=420, what="the word count to end")
        took = time.monotonic() - submission.started
        output = submission.output()
        final = local_yarn.application(app_id)
        assert final is not None and final["finalStatus"] == "SUCCEEDED", output[-6000:]
        assert submission.process.returncode == 0, output[-6000:]

        # The driver's verdict: in spark-submit's output in client mode, in the application
        # master's container in cluster mode (its first container, _000001).
        stdouts = container_text(local_yarn, app_id, "stdout")
        master = [text for container, text in stdouts.items() if container.endswith("_000001")]
        driver_output = output if deploy_mode == "client" else "".join(master)
        assert COUNTED in driver_output, driver_output[-6000:]
        verdict = re.search(r"produced (\d+) words in \d+ lines; counted (\d+) words", driver_output)
        assert verdict is not None and verdict.group(1) == verdict.group(2) != "0", driver_output[-4000:]

        # The receiver ran in an executor's container, not in the driver, and wrote its
        # write-ahead log under the checkpoint on HDFS.
        stderrs = container_text(local_yarn, app_id, "stderr")
        receivers = {
            container: match.group(1)
            for container, text in stderrs.items()
            if not container.endswith("_000001") and (match := RECEIVER_LINE.search(text))
        }
        assert len(receivers) == 1, {c: t[-2000:] for c, t in stderrs.items()}
        assert set(receivers.values()) == {urlsplit(checkpoint).path}, receivers
        print(
            f"word count on YARN, {deploy_mode} mode: {verdict.group(1)} words counted; "
            f"spark-submit to exit {took:.1f} s; receiver in {next(iter(receivers))}"
        )
    finally:
        submission.end()
