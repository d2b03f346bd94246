"""What the DStreams use of the ``StreamingContext`` they belong to.

A protocol, not an import: the context comes last in the package's layering (it builds the graph,
the scheduler and the status page and hands each its collaborators, see
``tests/test_import_graph.py``), so no DStream imports it. ``reliable_kafka.StreamingContext``
satisfies it; ``KafkaUtils`` checks an argument against it (runtime checkable) to refuse pyspark's
own ``StreamingContext`` with a clear error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pyspark import SparkContext

    from reliable_kafka.dstream.dstream_graph import DStreamGraph
    from reliable_kafka.settings import StreamingSettings


@runtime_checkable
class StreamingContextLike(Protocol):
    @property
    def graph(self) -> DStreamGraph: ...

    @property
    def settings(self) -> StreamingSettings: ...

    @property
    def sparkContext(self) -> SparkContext: ...

    @property
    def batch_duration_ms(self) -> int: ...

    @property
    def checkpoint_dir(self) -> str | None: ...

    def next_input_stream_id(self) -> int:
        """A new input stream's id, unique in the context."""
        ...

    def check_accepts_new_streams(self) -> None:
        """Raises if streams can no longer be added (the context has started or stopped)."""
        ...
