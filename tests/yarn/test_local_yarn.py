"""LocalYarn's start bound: a cluster that is not up in time is an error that says so, and leaves
nothing running (its JVM, and anything started in its directory, killed by pid). And the
configuration a NodeManager process is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.yarn import LocalYarn, processes_under
from reliable_kafka.local.yarn_nodemanager import read_hadoop_conf, write_hadoop_conf

pytestmark = [pytest.mark.yarn]


def test_start_not_done_in_time_is_a_clear_error_and_leaves_nothing_running(tmp_path: Path) -> None:
    yarn = LocalYarn(tmp_path / "yarn")
    with pytest.raises(ClusterStartError, match=r"YARN did not register 2 NodeManagers .* within 1 s"):
        yarn.start(timeout_s=1.0)
    assert not yarn.is_running()
    assert processes_under(tmp_path) == []
    assert not (yarn.conf_dir / "yarn-site.xml").exists()  # no configuration of a cluster not up


def test_a_nodemanager_configuration_is_the_clusters_with_its_own_keys(tmp_path: Path) -> None:
    """What a NodeManager process reads: the ResourceManager's file, its own keys on top, values
    with XML's special characters kept as written."""
    cluster = {"yarn.resourcemanager.address": "localhost:4242", "a.b": "x<y & 'z'"}
    write_hadoop_conf(cluster, tmp_path / "yarn-site.xml")
    assert read_hadoop_conf(tmp_path / "yarn-site.xml") == cluster
    own = {"yarn.nodemanager.hostname": "127.0.0.11", "a.b": "y"}
    write_hadoop_conf(read_hadoop_conf(tmp_path / "yarn-site.xml") | own, tmp_path / "nm-site.xml")
    assert read_hadoop_conf(tmp_path / "nm-site.xml") == {**cluster, **own}
    assert not list(tmp_path.glob(".*.tmp"))
