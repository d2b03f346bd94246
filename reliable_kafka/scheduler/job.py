"""Spark's ``Job`` (one output operation of one batch) and ``JobSet`` (all jobs of one batch)."""

from __future__ import annotations

import dataclasses
import logging
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reliable_kafka.scheduler.listener_events import BatchInfo, OutputOperationInfo, StreamInputInfo
from reliable_kafka.util.clock import wall_clock_ms

logger = logging.getLogger(__name__)


class Job:
    """Runs ``func`` once; keeps its return value or the exception it raised."""

    def __init__(
        self,
        time_ms: int,
        output_op_id: int,
        func: Callable[[], Any],
        *,
        name: str = "",
        description: str = "",
    ) -> None:
        self.time_ms = time_ms
        self.output_op_id = output_op_id
        self.func = func
        self.name = name or f"output operation {output_op_id}"
        self.description = description or self.name
        self.start_time_ms: int | None = None
        self.end_time_ms: int | None = None
        self._ran = False
        self._result: Any = None
        self._error: BaseException | None = None

    @property
    def id(self) -> str:
        return f"streaming job {self.time_ms} ms.{self.output_op_id}"

    def run(self) -> None:
        try:
            self._result = self.func()
        except Exception as exc:
            # Spark's Try(func()): the scheduler reports it after completing the job.
            self._error = exc
        finally:
            self._ran = True

    @property
    def has_run(self) -> bool:
        return self._ran

    @property
    def result(self) -> Any:
        """The function's return value; raises the job's error if it failed."""
        if not self._ran:
            raise RuntimeError(f"{self.id} has not run yet")
        if self._error is not None:
            raise self._error
        return self._result

    @property
    def error(self) -> BaseException | None:
        return self._error

    def to_output_operation_info(self) -> OutputOperationInfo:
        failure = None
        if self._error is not None:
            failure = "".join(traceback.format_exception(self._error))
        return OutputOperationInfo(
            batch_time_ms=self.time_ms,
            id=self.output_op_id,
            name=self.name,
            description=self.description,
            start_time_ms=self.start_time_ms,
            end_time_ms=self.end_time_ms,
            failure_reason=failure,
        )

    def __repr__(self) -> str:
        return self.id


class JobSet:
    """The jobs of one batch and when the batch was submitted, started and finished (wall clock).

    Not thread-safe: the job scheduler mutates it under its own lock.
    """

    def __init__(
        self,
        time_ms: int,
        jobs: Sequence[Job],
        stream_id_to_num_records: Mapping[int, int] | None = None,
        stream_id_to_input_info: Mapping[int, StreamInputInfo] | None = None,
    ) -> None:
        self.time_ms = time_ms
        self.jobs = list(jobs)
        infos = dict(stream_id_to_input_info or {})
        for stream_id, num_records in (stream_id_to_num_records or {}).items():
            infos.setdefault(stream_id, StreamInputInfo(stream_id, num_records))
        self.stream_id_to_input_info: dict[int, StreamInputInfo] = infos
        self.submission_time_ms = wall_clock_ms()
        self.processing_start_time_ms: int | None = None
        self.processing_end_time_ms: int | None = None
        self._incomplete = {id(job) for job in self.jobs}
        # Per stream, input metadata known only after the jobs ran (see BlockRDD).
        self.late_input_metadata: dict[int, Callable[[], Mapping[str, Any]]] = {}

    @property
    def stream_id_to_num_records(self) -> dict[int, int]:
        return {stream_id: info.num_records for stream_id, info in self.stream_id_to_input_info.items()}

    def handle_job_start(self, job: Job) -> None:
        if self.processing_start_time_ms is None:
            self.processing_start_time_ms = wall_clock_ms()

    def handle_job_completion(self, job: Job) -> None:
        self._incomplete.discard(id(job))
        if self.has_completed:
            self.processing_end_time_ms = wall_clock_ms()

    @property
    def has_started(self) -> bool:
        return self.processing_start_time_ms is not None

    @property
    def has_completed(self) -> bool:
        return not self._incomplete

    @property
    def scheduling_delay_ms(self) -> int | None:
        """Time the batch waited in the scheduler before its first job started."""
        if self.processing_start_time_ms is None:
            return None
        return self.processing_start_time_ms - self.submission_time_ms

    @property
    def processing_delay_ms(self) -> int | None:
        """Time from the first job's start to the last job's end."""
        if self.processing_start_time_ms is None or self.processing_end_time_ms is None:
            return None
        return self.processing_end_time_ms - self.processing_start_time_ms

    @property
    def total_delay_ms(self) -> int | None:
        """Spark's JobSet.totalDelay: from the batch time (not the submission) to the last job's end."""
        if self.processing_end_time_ms is None:
            return None
        return self.processing_end_time_ms - self.time_ms

    def to_batch_info(self) -> BatchInfo:
        return BatchInfo(
            batch_time_ms=self.time_ms,
            stream_id_to_input_info=self._input_infos(),
            submission_time_ms=self.submission_time_ms,
            processing_start_time_ms=self.processing_start_time_ms,
            processing_end_time_ms=self.processing_end_time_ms,
            output_operation_infos={job.output_op_id: job.to_output_operation_info() for job in self.jobs},
        )

    def _input_infos(self) -> dict[int, StreamInputInfo]:
        infos = dict(self.stream_id_to_input_info)
        if self.has_completed:
            for stream_id, late in self.late_input_metadata.items():
                info = infos.get(stream_id) or StreamInputInfo(stream_id, 0)
                infos[stream_id] = dataclasses.replace(info, metadata={**info.metadata, **late()})
        return infos

    def __repr__(self) -> str:
        return f"JobSet(time={self.time_ms} ms, jobs={len(self.jobs)})"
