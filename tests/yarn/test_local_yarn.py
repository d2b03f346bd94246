"""LocalYarn's start bound: a cluster that is not up in time is an error that says so, and leaves
nothing running (its JVM, and anything started in its directory, killed by pid)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reliable_kafka.local.errors import ClusterStartError
from reliable_kafka.local.yarn import LocalYarn, processes_under

pytestmark = [pytest.mark.yarn]


def test_start_not_done_in_time_is_a_clear_error_and_leaves_nothing_running(tmp_path: Path) -> None:
    yarn = LocalYarn(tmp_path / "yarn")
    with pytest.raises(ClusterStartError, match=r"YARN did not register 2 NodeManagers .* within 1 s"):
        yarn.start(timeout_s=1.0)
    assert not yarn.is_running()
    assert processes_under(tmp_path) == []
    assert not (yarn.conf_dir / "yarn-site.xml").exists()  # no configuration of a cluster not up
