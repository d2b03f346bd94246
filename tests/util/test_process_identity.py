"""util/process_identity.py: a process another one on the same machine can tell is gone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from reliable_kafka.util.process_identity import current_identity, is_gone

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux's /proc")


def test_this_process_is_not_gone_and_an_exited_one_is() -> None:
    mine = current_identity()
    assert mine is not None and not is_gone(mine)
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "from reliable_kafka.util.process_identity import current_identity as c; print(c())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    exited = child.stdout.strip()
    assert exited.split("/")[:3] == mine.split("/")[:3]  # the same boot and pid namespace
    assert is_gone(exited)


def test_a_reused_pid_is_gone_and_what_cannot_be_checked_never_is() -> None:
    mine = current_identity()
    assert mine is not None
    prefix, boot, namespace, pid, started = mine.split("/")
    assert is_gone("/".join((prefix, boot, namespace, pid, str(int(started) + 1))))  # a later process
    # Another boot or another pid namespace (a container sharing the host name): not judged.
    assert not is_gone("/".join((prefix, "another-boot", namespace, "999999999", started)))
    assert not is_gone("/".join((prefix, boot, "1", "999999999", started)))
    for unknown in (None, "", "windows/1/2/3/4", "linux/x"):
        assert not is_gone(unknown)
