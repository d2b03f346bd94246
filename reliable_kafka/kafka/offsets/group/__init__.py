"""The Kafka-native wing: the group coordinator's membership and offsets, knowing nothing of Spark.

``membership`` joins a group through the coordinator (no ZooKeeper) and reports ownership
changes as the ZooKeeper group does; ``offset_store`` commits and fetches a group's offsets
through the coordinator (OffsetCommit/OffsetFetch), as ``kafka-consumer-groups``, Burrow and
kafka_exporter read them.
"""
