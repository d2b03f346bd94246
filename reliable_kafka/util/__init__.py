"""Mechanics every stage uses and no stage owns."""
