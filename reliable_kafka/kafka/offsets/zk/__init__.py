"""The ZooKeeper wing's recipes: Kafka 0.8's consumer-group protocol, knowing nothing of Spark.

``ownership``, ``range_assignor``, ``group_membership``, ``offset_store`` and ``unowned_offsets``,
built only on the protocol core's public surface (:mod:`reliable_kafka.kafka.client.zk`).
"""
