"""The driver's status page (Spark's Streaming tab), its ``/metrics`` and the consumer lag they show."""
