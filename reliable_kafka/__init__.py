"""Spark Streaming's reliable, receiver-based Kafka input for PySpark."""

__version__ = "0.1.0"
