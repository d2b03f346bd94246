"""Room 1 of ``kafka/``: reaching the cluster. Knows nothing of consumer groups or Spark.

What every later room uses to talk to Kafka and ZooKeeper: ``params`` (kafkaParams split into
ours and librdkafka's), ``client_config`` (the one path every client's TLS/SASL settings take),
``consumer`` (a librdkafka consumer with our logger and error callback), the receiver's one
``shared_client`` with its ``packed_fetch`` (the C extension), ``fetch_admission`` and
``fetch_stall``; ``range_reader`` reads exact offset ranges (a block read again; KafkaRDD without
packed fetch), ``chunk_range_reader`` the same as block chunks through packed fetch (KafkaRDD);
``broker_protocol_probe``; the values ``TopicAndPartition`` and ``OffsetRange``; and ``zk/``, the
ZooKeeper protocol core (connection, the 0.8 layout, broker discovery).
"""
