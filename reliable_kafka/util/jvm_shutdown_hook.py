"""The streaming context stopped from the driver JVM's shutdown, before Spark's own hooks run.

Spark's Scala ``StreamingContext`` registers a shutdown hook above the SparkContext's, so that a
SIGTERM to the driver JVM stops the streams first (gracefully with
``spark.streaming.stopGracefullyOnShutdown``) and only then the SparkContext. Here the context
lives in Python, and a cluster manager's stop often signals the JVM only: Kubernetes' init process
in Spark's image, YARN's kill of the container, a plain ``kill`` of ``spark-submit`` (the JVM is
the Python driver's parent then). The JVM then runs its shutdown hooks, and Spark's stop the
SparkContext under the running stream: batches fail, the receivers die mid-block.

:func:`register` puts a hook of ours into Hadoop's ``ShutdownHookManager`` (on the class path of
every pyspark; Spark runs all its hooks inside one hook there, at priority 40, and higher
priorities run first) that calls back into this process through py4j's callback server
(pyspark's, the one ``foreachBatch`` uses; it authenticates with the gateway's secret) and runs
the same stop a SIGTERM to Python runs. The hook is removed when the context stops, so a JVM
that outlives this process never calls back into a process that is gone after a stop.

A driver that crashes (killed, ``os._exit``, killed during the hook's call) never removes it:
its JVM then exits on its own and the hook's call finds no Python to answer. The manager gets
the hook inside a ``java.util.concurrent.FutureTask``, whose ``run`` keeps what the call threw
instead of throwing it: a hook whose Python is gone ends quietly, where Hadoop logged
"ShutdownHook '$Proxy32' failed" with py4j's stack for every crash. Nothing is lost by that: the
Python side logs every error of the stop itself, so what reaches the JVM is only py4j's failure
to reach this process.

Risk, named here and nowhere else: Hadoop's ``ShutdownHookManager`` is a public but
``@InterfaceStability.Evolving`` API; if its methods change, :func:`register` logs that the JVM's
shutdown will not stop the streams first, and everything else works as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

# Above Spark's hooks (Hadoop's FileSystem.SHUTDOWN_HOOK_PRIORITY + 30 = 40), as Spark's
# StreamingContext hook (51) is above the SparkContext's (50) inside Spark's own manager.
PRIORITY = 50


# The py4j view of a JVM whose shutdown ran a hook of ours (it is going away), to tell when it is gone.
_shutting_down_jvm: list[Any] = []


class _StopOnShutdown:
    """What the JVM calls (java.lang.Runnable through py4j): the stop, its errors logged."""

    def __init__(self, stop: Callable[[], None], jvm: Any) -> None:
        self._stop = stop
        self._jvm = jvm

    def run(self) -> None:
        logger.info("The driver JVM is shutting down: stopping the streaming context first")
        _shutting_down_jvm[:] = [self._jvm]
        try:
            self._stop()
        except Exception:
            logger.exception("Stopping the streaming context from the JVM's shutdown failed")

    def toString(self) -> str:
        return "reliable-kafka: stop the streaming context"

    class Java:
        implements = ["java.lang.Runnable"]  # noqa: RUF012 - py4j's declaration, read as is


class JvmShutdownHook:
    """A registered hook; :meth:`remove` takes it out (a no-op once the JVM is shutting down)."""

    def __init__(self, manager: Any, java_hook: Any) -> None:
        self._manager = manager
        self._java_hook = java_hook

    def remove(self) -> None:
        hook, self._java_hook = self._java_hook, None
        if hook is None:
            return
        try:
            self._manager.removeShutdownHook(hook)
        except Exception as exc:
            # "Shutdown in progress": the hook is running or ran; nothing to take out.
            logger.debug("Could not remove the JVM shutdown hook: %r", exc)


def register(sc: Any, stop: Callable[[], None], timeout_s: float) -> JvmShutdownHook | None:
    """Run ``stop`` when the driver JVM shuts down, before Spark's hooks, for up to ``timeout_s``
    seconds; None (logged) where the JVM cannot take the hook."""
    try:
        from pyspark.java_gateway import ensure_callback_server_started  # noqa: PLC0415

        gateway, jvm = sc._gateway, sc._jvm
        ensure_callback_server_started(gateway)
        # The FutureTask is kept: removeShutdownHook compares hooks by identity. It holds the
        # one Java proxy of the Python object, and swallows what the call throws (see above).
        java_hook = jvm.java.util.concurrent.FutureTask(_StopOnShutdown(stop, jvm), None)
        manager = jvm.org.apache.hadoop.util.ShutdownHookManager.get()
        seconds = jvm.java.util.concurrent.TimeUnit.SECONDS
        manager.addShutdownHook(java_hook, PRIORITY, max(1, int(timeout_s)), seconds)
    except Exception as exc:
        logger.warning(
            "The driver JVM's shutdown (a SIGTERM to the JVM) will not stop the streaming context "
            "first: registering a shutdown hook failed: %r",
            exc,
        )
        return None
    return JvmShutdownHook(manager, java_hook)


def outlive_jvm_shutdown(timeout_s: float = 30.0) -> None:
    """At this process's exit, after the JVM's shutdown called our hook: wait (bounded) until
    the JVM is gone. The stop in the hook released the application's ``awaitTermination``, and
    a process that ended right then would leave the JVM's call unanswered: the hook would end
    as failed (quietly, inside its FutureTask) instead of with the stop's outcome."""
    if not _shutting_down_jvm:
        return
    jvm = _shutting_down_jvm[0]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            jvm.java.lang.System.currentTimeMillis()
        except Exception:
            return  # the gateway is closed: the JVM has exited
        time.sleep(0.2)  # py4j tells no event when the JVM goes: a bounded poll
