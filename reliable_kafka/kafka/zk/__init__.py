"""The ZooKeeper wing: Kafka 0.8's consumer-group protocol, knowing nothing of Spark.

``paths`` and ``client`` are the protocol core (the 0.8 layout under ``/consumers`` and
``/brokers``, a kazoo client with the retry policy); ``broker_discovery``, ``ownership``,
``range_assignor``, ``group_membership`` and ``offset_store`` are the recipes on top.
"""
