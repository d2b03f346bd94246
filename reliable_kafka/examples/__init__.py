"""Runnable examples: ``python -m reliable_kafka.examples.wordcount``."""
