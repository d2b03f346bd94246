"""The driver checkpoint the checkpoint and context tests write, read back and restart from."""

from __future__ import annotations

from reliable_kafka.checkpoint import Checkpoint, InputStreamRecord

CHECKPOINT = Checkpoint(
    checkpoint_time_ms=3000,
    zero_time_ms=0,
    batch_duration_ms=1000,
    checkpoint_duration_ms=1000,
    last_generated_batch_time_ms=3000,
    pending_times_ms=(3000,),
    remember_duration_ms=None,
    max_input_remember_duration_ms=1000,
    input_streams=(InputStreamRecord(0, "QueueInputDStream", False),),
    written_at_ms=123,
)
