"""Spark's ``DStreamGraph``: the input and output streams of a context, started and cleared together."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from pyspark.rdd import portable_hash

from reliable_kafka import state_checkpoint
from reliable_kafka.scheduler.job import Job
from reliable_kafka.state_checkpoint import StateStreamRecord

if TYPE_CHECKING:
    from typing import Any

    from reliable_kafka.dstream.dstream import DStream
    from reliable_kafka.dstream.input_dstream import InputDStream

logger = logging.getLogger(__name__)


class DStreamGraph:
    """Generation and cleanup run on the job generator's thread; ``lock`` also guards user calls
    such as ``DStream.slice`` made from other threads."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.input_streams: list[InputDStream] = []
        self.output_streams: list[DStream] = []
        self.batch_duration_ms: int | None = None
        self.remember_duration_ms: int | None = None
        self.zero_time_ms: int | None = None
        # The time just before this run's first batch: the zero time on a fresh start, the batch
        # before the first regenerated one after a restart. State older than it is not available.
        self.start_time_ms: int | None = None

    # ------------------------------------------------------------ building

    def set_batch_duration(self, duration_ms: int) -> None:
        with self.lock:
            if self.batch_duration_ms is not None:
                raise ValueError(
                    f"Batch duration already set as {self.batch_duration_ms} ms; cannot set it again"
                )
            self.batch_duration_ms = duration_ms

    def remember(self, duration_ms: int) -> None:
        with self.lock:
            if self.remember_duration_ms is not None:
                raise ValueError(f"Remember duration already set as {self.remember_duration_ms} ms")
            self.remember_duration_ms = duration_ms

    def add_input_stream(self, stream: InputDStream) -> None:
        with self.lock:
            stream.set_graph(self)
            self.input_streams.append(stream)

    def add_output_stream(self, stream: DStream) -> None:
        with self.lock:
            stream.set_graph(self)
            self.output_streams.append(stream)

    def get_input_streams(self) -> list[InputDStream]:
        return list(self.input_streams)

    def get_output_streams(self) -> list[DStream]:
        return list(self.output_streams)

    def get_receiver_input_streams(self) -> list[InputDStream]:
        return [stream for stream in self.input_streams if stream.is_receiver_input]

    def validate(self) -> None:
        if self.batch_duration_ms is None:
            raise ValueError("Batch duration has not been set")
        if not self.output_streams:
            raise ValueError("No output operations registered, so nothing to execute")

    # ------------------------------------------------------------ running

    def start(self, zero_time_ms: int, start_time_ms: int | None = None) -> None:
        """Initialize every stream at ``zero_time_ms`` and start the input streams."""
        with self.lock:
            if self.zero_time_ms is not None:
                raise RuntimeError("DStream graph computation already started")
            self.zero_time_ms = zero_time_ms
            self.start_time_ms = zero_time_ms if start_time_ms is None else start_time_ms
            for stream in self.output_streams:
                stream.initialize(zero_time_ms)
            for stream in self.output_streams:
                stream.remember(self.remember_duration_ms)
            for stream in self.output_streams:
                stream.validate_at_start()
            for stream in self.input_streams:
                stream.start()
        logger.info(
            "DStream graph started at zero time %d ms with %d input and %d output streams",
            zero_time_ms,
            len(self.input_streams),
            len(self.output_streams),
        )

    def stop(self) -> None:
        for stream in self.input_streams:
            try:
                stream.stop()
            except Exception:
                logger.exception("Error stopping %s", stream)

    def generate_jobs(self, time_ms: int) -> list[Job]:
        """One job per output stream that has an RDD at ``time_ms``; its id is the output's index."""
        with self.lock:
            jobs = []
            for output_op_id, stream in enumerate(self.output_streams):
                job = stream.generate_job(time_ms, output_op_id)
                if job is not None:
                    jobs.append(job)
        logger.debug("Generated %d jobs for time %d ms", len(jobs), time_ms)
        return jobs

    def clear_metadata(self, time_ms: int) -> None:
        with self.lock:
            for stream in self.output_streams:
                stream.clear_metadata(time_ms)

    def get_max_input_stream_remember_duration(self) -> int | None:
        """The longest remember duration of the input streams in use (unused ones have none)."""
        durations = [s.remember_duration_ms for s in self.input_streams if s.remember_duration_ms is not None]
        return max(durations, default=None)

    # ------------------------------------------------------------ state checkpoints

    def checkpointed_streams(self) -> list[DStream]:
        """Streams whose RDDs are checkpointed (stateful, or marked), in graph order: depth first
        from each output stream, as setupFunc builds them; the order keys their state checkpoints."""
        found: list[DStream] = []
        seen: set[int] = set()

        def visit(stream: DStream) -> None:
            if id(stream) in seen:
                return
            seen.add(id(stream))
            if stream.must_checkpoint or stream.is_checkpointed:
                found.append(stream)
            for parent in stream.dependencies:
                visit(parent)

        with self.lock:
            for output in self.output_streams:
                visit(output)
        return found

    def write_state_checkpoints(self, time_ms: int, handle: dict[str, Any] | str) -> bool:
        """Write the newest not yet written checkpoint-time RDD at or before ``time_ms`` of every
        checkpointed stream (its batch has completed); True if any was written."""
        written = False
        for position, stream in enumerate(self.checkpointed_streams()):
            with self.lock:
                interval, zero = stream.checkpoint_duration_ms, stream.zero_time_ms
                if interval is None or zero is None:
                    continue
                latest = stream.state_snapshots[-1].time_ms if stream.state_snapshots else None
                due = [
                    t
                    for t in stream.generated_rdds
                    if t <= time_ms and (t - zero) % interval == 0 and (latest is None or t > latest)
                ]
                if not due:
                    continue
                snapshot_time = max(due)
                rdd = stream.generated_rdds[snapshot_time]
            partitioner = rdd.partitioner
            hashed = partitioner is not None and partitioner.partitionFunc is portable_hash
            # Outside the lock: a Spark job, which user calls such as slice() must not wait for.
            snapshot = state_checkpoint.write_snapshot(rdd, handle, position, snapshot_time, hashed)
            with self.lock:
                kept = [*stream.state_snapshots, snapshot][-state_checkpoint.KEPT_SNAPSHOTS :]
                stream.state_snapshots = kept
            logger.info(
                "State checkpoint of %s at %d ms written (%d files, %d records)",
                stream,
                snapshot_time,
                snapshot.num_partitions,
                sum(f.records for f in snapshot.files),
            )
            written = True
        return written

    def state_records(self) -> tuple[StateStreamRecord, ...]:
        """What the driver checkpoint records of the state checkpoints."""
        streams = self.checkpointed_streams()
        with self.lock:
            return tuple(
                StateStreamRecord(position, stream.checkpoint_signature(), tuple(stream.state_snapshots))
                for position, stream in enumerate(streams)
            )
