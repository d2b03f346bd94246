"""DStreams: Spark Streaming's discretized streams, rebuilt in Python over pyspark RDDs."""

# dstream first: the operation modules import DStream from it.
from reliable_kafka.dstream.dstream import DStream
from reliable_kafka.dstream.dstream_graph import DStreamGraph
from reliable_kafka.dstream.foreach_dstream import ForEachDStream
from reliable_kafka.dstream.input_dstream import InputDStream
from reliable_kafka.dstream.queue_input_dstream import QueueInputDStream
from reliable_kafka.dstream.reduced_windowed_dstream import ReducedWindowedDStream
from reliable_kafka.dstream.state_dstream import StateDStream
from reliable_kafka.dstream.transformed_dstream import TransformedDStream
from reliable_kafka.dstream.union_dstream import UnionDStream
from reliable_kafka.dstream.windowed_dstream import WindowedDStream

__all__ = [
    "DStream",
    "DStreamGraph",
    "ForEachDStream",
    "InputDStream",
    "QueueInputDStream",
    "ReducedWindowedDStream",
    "StateDStream",
    "TransformedDStream",
    "UnionDStream",
    "WindowedDStream",
]
