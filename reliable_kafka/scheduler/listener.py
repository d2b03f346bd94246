"""Spark's ``StreamingListener``: the base class an application subclasses to hear of batches and
receivers (``ssc.addStreamingListener``).

Listener methods are pyspark's camelCase names (``onBatchCompleted``). The base class forwards
each of them to a snake_case twin (``on_batch_completed``) so that internal listeners, such as the
rate controllers, can be written in our own style; override either, not both.

The events and payloads live in ``listener_events``; they are re-exported here because this is
the module a listener's code imports from, as pyspark's is ``pyspark.streaming.listener``.
"""

from __future__ import annotations

from reliable_kafka.scheduler.listener_events import (
    BatchInfo,
    OutputOperationInfo,
    ReceiverInfo,
    ScalingDecision,
    StreamingListenerBatchCompleted,
    StreamingListenerBatchStarted,
    StreamingListenerBatchSubmitted,
    StreamingListenerEvent,
    StreamingListenerOutputOperationCompleted,
    StreamingListenerOutputOperationStarted,
    StreamingListenerReceiverError,
    StreamingListenerReceiverStarted,
    StreamingListenerReceiverStopped,
    StreamingListenerScalingDecision,
    StreamingListenerStreamingError,
    StreamingListenerStreamingStarted,
    StreamInputInfo,
)

__all__ = [
    "BatchInfo",
    "OutputOperationInfo",
    "ReceiverInfo",
    "ScalingDecision",
    "StreamInputInfo",
    "StreamingListener",
    "StreamingListenerBatchCompleted",
    "StreamingListenerBatchStarted",
    "StreamingListenerBatchSubmitted",
    "StreamingListenerEvent",
    "StreamingListenerOutputOperationCompleted",
    "StreamingListenerOutputOperationStarted",
    "StreamingListenerReceiverError",
    "StreamingListenerReceiverStarted",
    "StreamingListenerReceiverStopped",
    "StreamingListenerScalingDecision",
    "StreamingListenerStreamingError",
    "StreamingListenerStreamingStarted",
]


class StreamingListener:
    """Override the callbacks you need; every one defaults to doing nothing."""

    def onStreamingStarted(self, streamingStarted: StreamingListenerStreamingStarted) -> None:
        self.on_streaming_started(streamingStarted)

    def onReceiverStarted(self, receiverStarted: StreamingListenerReceiverStarted) -> None:
        self.on_receiver_started(receiverStarted)

    def onReceiverError(self, receiverError: StreamingListenerReceiverError) -> None:
        self.on_receiver_error(receiverError)

    def onReceiverStopped(self, receiverStopped: StreamingListenerReceiverStopped) -> None:
        self.on_receiver_stopped(receiverStopped)

    def onStreamingError(self, streamingError: StreamingListenerStreamingError) -> None:
        self.on_streaming_error(streamingError)

    def onScalingDecision(self, scalingDecision: StreamingListenerScalingDecision) -> None:
        self.on_scaling_decision(scalingDecision)

    def onBatchSubmitted(self, batchSubmitted: StreamingListenerBatchSubmitted) -> None:
        self.on_batch_submitted(batchSubmitted)

    def onBatchStarted(self, batchStarted: StreamingListenerBatchStarted) -> None:
        self.on_batch_started(batchStarted)

    def onBatchCompleted(self, batchCompleted: StreamingListenerBatchCompleted) -> None:
        self.on_batch_completed(batchCompleted)

    def onOutputOperationStarted(
        self,
        outputOperationStarted: StreamingListenerOutputOperationStarted,
    ) -> None:
        self.on_output_operation_started(outputOperationStarted)

    def onOutputOperationCompleted(
        self,
        outputOperationCompleted: StreamingListenerOutputOperationCompleted,
    ) -> None:
        self.on_output_operation_completed(outputOperationCompleted)

    def on_streaming_started(self, event: StreamingListenerStreamingStarted) -> None:
        pass

    def on_receiver_started(self, event: StreamingListenerReceiverStarted) -> None:
        pass

    def on_receiver_error(self, event: StreamingListenerReceiverError) -> None:
        pass

    def on_receiver_stopped(self, event: StreamingListenerReceiverStopped) -> None:
        pass

    def on_streaming_error(self, event: StreamingListenerStreamingError) -> None:
        pass

    def on_scaling_decision(self, event: StreamingListenerScalingDecision) -> None:
        pass

    def on_batch_submitted(self, event: StreamingListenerBatchSubmitted) -> None:
        pass

    def on_batch_started(self, event: StreamingListenerBatchStarted) -> None:
        pass

    def on_batch_completed(self, event: StreamingListenerBatchCompleted) -> None:
        pass

    def on_output_operation_started(self, event: StreamingListenerOutputOperationStarted) -> None:
        pass

    def on_output_operation_completed(self, event: StreamingListenerOutputOperationCompleted) -> None:
        pass
