"""Room 3a of ``kafka/``: ``createStream``, records read by a long-running receiver.

``consumer_connector`` joins the group (:mod:`reliable_kafka.kafka.offsets`) and runs one
``partition_consumer`` per owned partition on the shared client; ``reliable_receiver`` (offsets
follow stored blocks, ``block_offsets``) and ``kafka_receiver`` (periodic auto commit) hand records
to the block generator; ``kafka_input_dstream`` is the driver's side, ``block_reread`` reads a block
again from Kafka when its WAL record is lost, ``decode_errors`` is ``decodeErrors``.
"""
