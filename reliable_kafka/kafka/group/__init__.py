"""Kafka-native consumer groups: membership and offsets through the group coordinator, no ZooKeeper."""
