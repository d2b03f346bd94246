"""Where received blocks live: storage levels, block ids, the block format and the block manager;
and where a batch gets a block again when its write-ahead log record cannot be read
(``block_recovery``)."""

from reliable_kafka.storage.block_format import (
    BLOCK_MAGIC,
    CHUNKED_BLOCK_MAGIC,
    BlockFormatError,
    EncodedBlock,
    PackedChunk,
    decode_block,
    encode_block,
    encode_chunks,
    pack_chunk,
)
from reliable_kafka.storage.block_id import StreamBlockId, StreamBlockIdGenerator
from reliable_kafka.storage.block_manager import BlockManager
from reliable_kafka.storage.block_store import BlockStore, BlockStoreError
from reliable_kafka.storage.storage_level import StorageLevel

__all__ = [
    "BLOCK_MAGIC",
    "CHUNKED_BLOCK_MAGIC",
    "BlockFormatError",
    "BlockManager",
    "BlockStore",
    "BlockStoreError",
    "EncodedBlock",
    "PackedChunk",
    "StorageLevel",
    "StreamBlockId",
    "StreamBlockIdGenerator",
    "decode_block",
    "encode_block",
    "encode_chunks",
    "pack_chunk",
]
