"""A receiver error that ends its stream.

Spark restarts a receiver after every error, which is right for what a restart can mend (a broker
restart, a lost session) and wrong for what it cannot: a topic that does not exist, a ZooKeeper
quorum no receiver reaches. Restarting those runs empty batches for ever, the cause in a log line
every few seconds. A receiver that stops (or restarts) with a :class:`FatalReceiverError` is not
launched again, and ``StreamingContext.awaitTermination`` raises the error on the driver.

Exceptions do not cross from an executor to the driver (nothing is pickled): the supervisor sends
the formatted error with a ``fatal`` mark, and the driver raises a :class:`FatalReceiverError` of
its own whose message is the receiver's error.
"""

from __future__ import annotations


class FatalReceiverError(Exception):
    """No restart of the receiver can mend this: its stream ends, ``awaitTermination`` raises it."""
