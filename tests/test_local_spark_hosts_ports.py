"""The several-hosts cluster's master ports, read from its log (reliable_kafka/local/spark_hosts.py):
bound by the master itself, never picked beforehand."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliable_kafka.local.spark_hosts import LocalSparkHosts

EARLIER_START = (
    "INFO Master: Starting Spark master at spark://127.0.0.1:40001\n"
    "INFO Utils: Successfully started service 'MasterUI' on port 40002.\n"
)
THIS_START = (
    "INFO Utils: Successfully started service 'sparkMaster' on port 41001.\n"
    "INFO Master: Starting Spark master at spark://127.0.0.1:41001\n"
    "WARN Utils: Service 'MasterUI' could not bind on port 41002. Attempting port 41003.\n"
    "INFO Utils: Successfully started service 'MasterUI' on port 41003.\n"
)


def test_the_ports_are_those_this_start_bound(tmp_path: Path) -> None:
    hosts = LocalSparkHosts(tmp_path, hosts=1, private_mounts=False)
    log = tmp_path / "master.log"
    log.write_text(EARLIER_START)
    log_start = log.stat().st_size
    with pytest.raises(RuntimeError, match="has not started"):
        _ = hosts.master_url
    assert not hosts._read_bound_ports(log, log_start)  # the earlier start's lines are not this one's
    with open(log, "a") as handle:
        handle.write(THIS_START)
    assert hosts._read_bound_ports(log, log_start)
    assert (hosts.master_url, hosts.webui_port) == ("spark://127.0.0.1:41001", 41003)
