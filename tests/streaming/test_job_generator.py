"""The job generator and scheduler against a fake receiver tracker, on a manual clock."""

from __future__ import annotations

import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from reliable_kafka.checkpoint import Checkpoint, read_checkpoint
from reliable_kafka.dstream.queue_input_dstream import QueueInputDStream
from reliable_kafka.scheduler.job_scheduler import JobSet
from reliable_kafka.scheduler.listener import StreamingListener, StreamingListenerBatchCompleted
from reliable_kafka.settings import StreamingSettings
from tests.streaming.conftest import BATCH_MS, ManualRun
from tests.streaming.fakes import FakeReceiverInputStream, batch_ms, processed
from tests.support import wait_until


def concurrent(jobs: int) -> StreamingSettings:
    return StreamingSettings.from_spark_conf({"spark.streaming.concurrentJobs": str(jobs)})


def start_and_await_the_generation_error_at_1000(run: ManualRun) -> None:
    """Start, reach batch 1000, and see awaitTermination raise its job generation error."""
    run.ssc.start()
    run.clock.set_time(1000)
    try:
        run.ssc.awaitTerminationOrTimeout(20)
    except RuntimeError as exc:
        assert "on purpose" in str(exc)
    else:
        raise AssertionError("the generation error was not raised")


def test_batches_fall_on_batch_boundaries_after_the_start_time(make_run) -> None:
    run: ManualRun = make_run(start_ms=1234)
    times: list[datetime] = []
    run.ssc.queueStream([[1], [2]]).foreachRDD(lambda time, rdd: times.append(time))
    run.advance(2)
    # Spark: the first batch is the next multiple of the batch duration; the zero time one before.
    assert run.ssc.graph.zero_time_ms == 1000
    assert [batch_ms(t) for t in times] == [2000, 3000]


def test_blocks_are_allocated_before_jobs_are_generated(make_run) -> None:
    run: ManualRun = make_run()
    batches: list[StreamingListenerBatchCompleted] = []

    class Recorder(StreamingListener):
        def onBatchCompleted(self, batchCompleted: StreamingListenerBatchCompleted) -> None:
            batches.append(batchCompleted)

    run.ssc.addStreamingListener(Recorder())
    stream = FakeReceiverInputStream(run.ssc)
    sizes = run.collect(stream.count())
    run.tracker.add_block(stream.id, 3)
    run.tracker.add_block(stream.id, 2)
    run.advance(1)
    run.tracker.add_block(stream.id, 4)
    run.advance(1)

    assert sizes == [[5], [4]]
    # At compute time the tracker had already allocated this batch, and no later one.
    assert stream.calls_seen_at_compute[1000][-1:] == ["allocate"]
    assert run.tracker.calls[run.tracker.call_names().index("allocate")] == ("allocate", 1000)
    assert run.ssc.scheduler.listener_bus.wait_until_empty(10)
    assert [b.batchInfo.numRecords for b in batches] == [5, 4]
    assert batches[0].batchInfo.streamIdToInputInfo[stream.id].numRecords == 5
    assert run.tracker.completed == {1000, 2000}


def test_concurrent_jobs_run_batches_side_by_side(make_run) -> None:
    for jobs, overlap in ((1, False), (2, True)):
        run: ManualRun = make_run(settings=concurrent(jobs))
        release = threading.Event()
        started: list[int] = []
        ran_on: dict[int, threading.Thread] = {}

        def work(
            time: datetime,
            rdd: object,
            release: threading.Event = release,
            started: list = started,
            ran_on: dict = ran_on,
        ) -> None:
            started.append(batch_ms(time))
            ran_on[batch_ms(time)] = threading.current_thread()
            if batch_ms(time) == 1000:
                release.wait(20)

        run.ssc.queueStream([[1], [2]]).foreachRDD(work)
        run.ssc.start()
        run.clock.set_time(2000)
        if overlap:
            wait_until(lambda started=started: sorted(started) == [1000, 2000], what="second batch to start")
        else:
            wait_until(
                lambda run=run, started=started: (
                    started == [1000] and 2000 in run.ssc.scheduler.get_pending_times()
                ),
                what="second batch queued behind the first",
            )
        release.set()
        wait_until(lambda run=run: processed(run.ssc, 2000), what="both batches")
        if not overlap:
            # Batch 2000 waited for the one job thread, held by 1000 until released: a second
            # thread, idle all along, would have taken it at once.
            assert started == [1000, 2000] and ran_on[2000] is ran_on[1000]
        run.ssc.stop(stopSparkContext=False)


def test_a_batch_is_transformed_once_when_generated_even_while_an_earlier_one_still_runs(make_run) -> None:
    """Spark's order: transform functions run on the job generator's thread as a batch is generated,
    output operations later on a job thread. So the Kafka guide's ``transform(storeOffsetRanges)
    .foreachRDD(printOffsetRanges)``, sharing one global, prints a later batch's value while
    batches wait behind a slow one: this is that pattern, batch 1000's job held until 2000 queues."""
    run: ManualRun = make_run()
    release = threading.Event()
    transformed: list[int] = []
    stored: list[int] = []  # the guide's global
    printed: list[tuple[int, int]] = []

    def store(time: datetime, rdd: object) -> object:
        transformed.append(batch_ms(time))
        stored[:] = [batch_ms(time)]
        return rdd

    def show(time: datetime, rdd: object) -> None:
        if batch_ms(time) == 1000:
            release.wait(20)
        printed.append((batch_ms(time), stored[0]))

    run.ssc.queueStream([[1], [2]]).transform(store).foreachRDD(show)
    run.ssc.start()
    run.clock.set_time(2000)
    wait_until(lambda: 2000 in run.ssc.scheduler.get_pending_times(), what="batch 2000 queued")
    release.set()
    wait_until(lambda: processed(run.ssc, 2000), what="both batches")

    assert transformed == [1000, 2000]
    assert printed == [(1000, 2000), (2000, 2000)]


def test_metadata_of_a_running_batch_is_never_cleared_when_later_batches_finish(make_run) -> None:
    run: ManualRun = make_run(settings=concurrent(3))
    release = threading.Event()
    stream = FakeReceiverInputStream(run.ssc)

    def work(time: datetime, rdd: object) -> None:
        if batch_ms(time) == 1000:
            release.wait(30)

    stream.foreachRDD(work)
    for _ in range(4):
        run.tracker.add_block(stream.id, 1)
    run.ssc.start()
    for time_ms in (1000, 2000, 3000, 4000):
        run.tracker.add_block(stream.id, 1)
        run.clock.set_time(time_ms)
        wait_until(
            lambda t=time_ms: 1000 in run.tracker.allocated and t in run.tracker.allocated, what=f"{time_ms}"
        )
    wait_until(lambda: run.tracker.completed == {2000, 3000, 4000}, what="later batches to complete")
    wait_until(lambda: run.tracker.call_names().count("cleanup") >= 3, what="cleanups after later batches")

    # Batch 1000 still runs: its blocks and its RDD must still be there. Receivers clean by store
    # time, and batch 1000's blocks were stored during the batch before it and are remembered for
    # one more batch: nothing from before 1000 - 1000 - 1000 may go.
    assert run.tracker.cleanups
    assert all(threshold <= 1000 - 2 * BATCH_MS for threshold in run.tracker.cleanups), run.tracker.cleanups
    assert 1000 in run.tracker.allocated
    assert 1000 in stream.generated_rdds
    assert run.ssc.scheduler.get_pending_times() == [1000]

    release.set()
    wait_until(lambda: processed(run.ssc, 4000), what="the first batch to finish")
    # Now everything up to the newest completed batch can go (minus the one-batch remember).
    assert run.tracker.cleanups[-1] == 3000
    assert sorted(run.tracker.allocated) == [3000, 4000]
    assert sorted(stream.generated_rdds) == [4000]


def test_a_batch_without_jobs_is_still_completed_in_the_tracker(make_run) -> None:
    run: ManualRun = make_run()
    # A two-second slide has no job at odd seconds, but those batches are done all the same.
    run.collect(run.ssc.queueStream([[1], [2]]).window(2, 2))
    run.advance(2)
    assert run.tracker.completed == {1000, 2000}


def test_job_generation_errors_reach_await_termination(make_run) -> None:
    run: ManualRun = make_run()

    def broken(rdd: object) -> object:
        raise RuntimeError("generation failed on purpose")

    run.collect(run.ssc.queueStream([[1]]).transform(broken))
    start_and_await_the_generation_error_at_1000(run)
    # The failed batch never completes, so a graceful stop must not wait for it.
    assert run.ssc.scheduler.job_generator.has_processed_up_to(1000)


def test_blocks_of_a_batch_whose_jobs_could_not_be_generated_go_to_the_next_batch(make_run) -> None:
    run: ManualRun = make_run()
    stream = FakeReceiverInputStream(run.ssc)

    def broken_once(time: datetime, rdd: object) -> object:
        if batch_ms(time) == 1000:
            raise RuntimeError("generation failed on purpose")
        return rdd

    sizes = run.collect(stream.transform(broken_once).count())
    run.tracker.add_block(stream.id, 3)
    start_and_await_the_generation_error_at_1000(run)
    wait_until(lambda: ("deallocate", [1000]) in run.tracker.calls, what="batch 1000 to be given back")
    assert run.tracker.pending_batch_times() == []
    run.tracker.add_block(stream.id, 4)
    run.clock.set_time(2000)
    wait_until(lambda: processed(run.ssc, 2000), what="batch 2000")

    # Batch 1000's records were allocated (their offsets committed): batch 2000 runs them.
    assert sizes == [[7]]


class BatchesInCheckpointStream(QueueInputDStream):
    """An input stream without a receiver whose batches are written down only in its checkpoint
    data, as a direct stream's ranges."""

    def checkpoint_data(self) -> dict[str, Any]:
        return {"batches": sorted(self.generated_rdds)}

    def restore_checkpoint_data(self, data: dict[str, Any]) -> None:
        pass


def test_a_batch_of_a_stream_without_a_receiver_is_checkpointed_pending_before_its_jobs_run(
    make_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run: ManualRun = make_run()
    run.ssc.checkpoint(str(tmp_path))
    on_disk_at_submit: dict[int, Checkpoint | None] = {}
    scheduler = run.ssc.scheduler
    submit = scheduler.submit_job_set

    def submit_after_reading_the_checkpoint(job_set: JobSet) -> None:
        on_disk_at_submit[job_set.time_ms] = read_checkpoint(tmp_path)
        submit(job_set)

    monkeypatch.setattr(scheduler, "submit_job_set", submit_after_reading_the_checkpoint)
    BatchesInCheckpointStream(run.ssc, [[1], [2]]).foreachRDD(lambda rdd: None)
    run.advance(2)

    # A driver killed once the jobs began restarts from a checkpoint holding the batch as pending,
    # with its stream's data of it: it runs the batch again as it was, never computes it anew.
    for time_ms in (1000, 2000):
        checkpoint = on_disk_at_submit[time_ms]
        assert checkpoint is not None and checkpoint.checkpoint_time_ms == time_ms
        assert time_ms in checkpoint.pending_times_ms
        assert checkpoint.last_generated_batch_time_ms == time_ms
        assert time_ms in checkpoint.input_streams[0].data["batches"]
    done = read_checkpoint(tmp_path)
    assert done is not None and done.pending_times_ms == ()
