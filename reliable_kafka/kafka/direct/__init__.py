"""Room 3b of ``kafka/``: ``createDirectStream`` and ``createRDD``, no receiver.

The driver asks ``kafka_cluster`` for each batch's ranges (``direct_kafka_input_dstream``, within
``rate_limit``), executors read them exactly (``kafka_rdd``, on the client room's range reader),
and ``offset_commit`` may commit completed batches to the group's store (the offsets registry).
``params`` adapts kafkaParams for it, ``broker`` and ``message_and_metadata`` are 2.4's values.
Knows nothing of the receiver room.
"""
