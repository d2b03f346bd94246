"""The driver JVM's shutdown hook that stops the streaming context first (util/jvm_shutdown_hook.py),
against the session's real SparkContext: registered in Hadoop's ShutdownHookManager, and taken out
again when the context stops. What a SIGTERM to the JVM does with it is tests/e2e/test_bounded_stop.py's."""

from __future__ import annotations

import pytest
from pyspark import SparkContext

from reliable_kafka.util import jvm_shutdown_hook

pytestmark = pytest.mark.integration


def test_the_hook_is_registered_above_spark_and_removed_once(spark_context: SparkContext) -> None:
    stops: list[str] = []
    hook = jvm_shutdown_hook.register(spark_context, lambda: stops.append("stop"), 30)
    assert hook is not None
    manager = spark_context._jvm.org.apache.hadoop.util.ShutdownHookManager.get()
    java_hook = hook._java_hook
    assert manager.hasShutdownHook(java_hook)
    hook.remove()
    assert not manager.hasShutdownHook(java_hook)
    hook.remove()  # a second stop of the context: nothing left to take out
    assert stops == []  # only the JVM's shutdown runs it


def test_a_jvm_that_cannot_take_the_hook_leaves_a_warning_not_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class NoGateway:
        _gateway = None
        _jvm = None

    assert jvm_shutdown_hook.register(NoGateway(), lambda: None, 30) is None
    assert "will not stop the streaming context first" in caplog.text
