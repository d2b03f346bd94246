"""The Kafka-native wing: the group coordinator's offsets (and membership), knowing nothing of Spark.

``offset_store`` commits and fetches a group's offsets through the coordinator
(OffsetCommit/OffsetFetch), as ``kafka-consumer-groups``, Burrow and kafka_exporter read them.
"""
