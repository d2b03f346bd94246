"""Second copies of a receiver's blocks, on a peer receiver's executor (levels with replication 2).

Spark's BlockManager copies a block to a peer BlockManager before ``putBlock`` returns. A Python
worker cannot reach its executor's BlockManager, and a Python process on an executor exists only
inside a task; the receivers' tasks are the long-running ones, and each already serves its blocks
from a block server. So a receiver has the block server of another receiver keep the copy
(``keep_replica``), and reports the block only once that answered.

State, per receiver launch:
1. peers: asked from the tracker (the block servers of the other receivers, other hosts first)
   when none is known, when the best known is on this host (a receiver on another host may have
   registered since), and after a peer failed;
2. each block goes to the first peer that stores it; a peer that fails is dropped (a dead peer
   costs only its replicas, never a block of this receiver);
3. when no peer takes it, the block keeps one copy: a WARNING the first time, for this stream,
   not per block; an INFO when blocks get two copies again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from reliable_kafka.receiver.tracker_endpoint import BlockLocation
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_server import BlockFetcher
from reliable_kafka.storage.storage_level import StorageLevel

logger = logging.getLogger(__name__)

PeerSource = Callable[[], Sequence[BlockLocation]]


class BlockReplicator:
    """Keeps the second copy of each block of stream ``stream_id`` (running on ``host``) on a peer.

    ``peers`` asks the tracker where (block servers, ``port`` set, best first); ``client`` speaks
    to the peers' block servers. Thread-safe: several block generators may push at once.
    """

    def __init__(self, stream_id: int, host: str, peers: PeerSource, client: BlockFetcher) -> None:
        self.stream_id = stream_id
        self.host = host
        self._peers_of = peers
        self._client = client
        self._lock = threading.Lock()
        self._peers: list[BlockLocation] = []
        self._single_copy_warned = False
        self._degraded = False

    def replicate(self, block_id: StreamBlockId, data: bytes, level: StorageLevel) -> BlockLocation | None:
        """Where the peer that stored the block's second copy keeps it; None when no peer did."""
        for peer in self._candidates():
            assert peer.port is not None
            try:
                path = self._client.keep_replica(peer.host, peer.port, block_id.name, data, level)
            except Exception as exc:
                logger.warning(
                    "Could not keep the second copy of block %s on executor %s (%s:%d): %r; "
                    "trying another peer",
                    block_id,
                    peer.executor_id,
                    peer.host,
                    peer.port,
                    exc,
                )
                self._drop(peer)
                continue
            self._replicated(peer)
            return BlockLocation(peer.host, peer.executor_id, path, peer.port)
        self._single_copy(block_id, level)
        return None

    def _candidates(self) -> list[BlockLocation]:
        with self._lock:
            peers = list(self._peers)
        if peers and peers[0].host != self.host:
            return peers
        try:
            fresh = list(self._peers_of())
        except Exception as exc:
            # The tracker connection's own loss stops the receiver; until then, the known peers.
            logger.debug("Could not ask the tracker for replica peers: %r", exc)
            return peers
        with self._lock:
            self._peers = fresh
        return fresh

    def _drop(self, peer: BlockLocation) -> None:
        with self._lock:
            self._peers = [known for known in self._peers if known != peer]

    def _replicated(self, peer: BlockLocation) -> None:
        with self._lock:
            was_degraded, self._degraded = self._degraded, False
        if was_degraded:
            logger.info(
                "Blocks of stream %d have two copies again: the second on executor %s (%s)",
                self.stream_id,
                peer.executor_id,
                peer.host,
            )

    def _single_copy(self, block_id: StreamBlockId, level: StorageLevel) -> None:
        with self._lock:
            warn = not self._single_copy_warned
            self._single_copy_warned = self._degraded = True
        if warn:
            logger.warning(
                "Block %s of stream %d is stored with 1 copy instead of %d (storage level %s): no other "
                "receiver's executor to keep a copy on (one executor, or the others not registered "
                "yet); blocks of this stream stored once from now on are not logged again",
                block_id,
                self.stream_id,
                level.replication,
                level.name,
            )
