"""Room 2 of ``kafka/``: the consumer group, who owns a partition and what it committed.

``store`` is the ``OffsetStore`` seam (commit, fetch; never backwards, never a partition not
owned); ``registry`` is the one place that turns ``offsets.storage`` / ``dual.commit.enabled``
into a store; ``dual`` commits to both while a group migrates; ``group_member`` is the membership
seam (``RebalanceListener``). Two wings implement them: ``zk/`` (Kafka 0.8's ZooKeeper recipes:
group membership, ownership, range assignment, offsets) and ``group/`` (Kafka's group
coordinator). Built on :mod:`reliable_kafka.kafka.client`; knows nothing of Spark.
"""
