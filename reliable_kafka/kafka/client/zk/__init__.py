"""ZooKeeper's protocol core, kazoo-style: knows no recipe, no settings, no Spark.

``paths`` (the 0.8 layout under ``/consumers`` and ``/brokers``), ``client`` (a kazoo client with
masked credentials and the retry policy), ``broker_discovery`` (brokers from ``/brokers/ids``).
The consumer-group recipes built on it live in :mod:`reliable_kafka.kafka.offsets.zk`.
"""
