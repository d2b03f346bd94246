"""The tracker socket and block fetches against their in-process baselines, measured in one run.

    python benchmarks/rpc_bench.py [--calls N] [--threads 1,4] [--block-mb 20] [--fetches N] [--tls]

add_block: T threads report N blocks in all (each ReceivedBlockInfo carries a WAL handle and
offset metadata) through RemoteTrackerEndpoint -> ReceiverTrackerServer -> a tracker that only
counts; baseline: the same calls on the same tracker in process. Reported: calls/s and ratio.
Block fetch: a block of --block-mb MB fetched --fetches times over one kept connection
(BlockFetcher) and over a fresh connection each (fetch_block); baseline: reading the same bytes
from a local file (page cache warm) as often. Reported: MB/s and ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reliable_kafka.receiver.remote_tracker import RemoteTrackerEndpoint
from reliable_kafka.receiver.tracker_endpoint import (
    ReceivedBlockInfo,
    ReceivedBlockStoreResult,
    ReceiverControl,
)
from reliable_kafka.rpc import new_secret
from reliable_kafka.scheduler.tracker_server import ReceiverTrackerServer
from reliable_kafka.storage.block_id import StreamBlockId
from reliable_kafka.storage.block_server import BlockFetcher, BlockServer, fetch_block
from wal import RecordHandle


class CountingTracker:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.blocks = 0

    def register_receiver(
        self, stream_id, receiver_type, host, executor_id, control: ReceiverControl
    ) -> bool:
        return True

    def add_block(self, info: ReceivedBlockInfo) -> bool:
        with self.lock:
            self.blocks += 1
        return True

    def report_error(self, stream_id, message, error) -> None:
        pass

    def deregister_receiver(self, stream_id, message, error, *, fatal=False) -> bool:
        return True


class NoControl:
    def update_rate_limit(self, rate): ...
    def stop_receiver(self, message): ...
    def cleanup_old_blocks(self, thresh_time_ms): ...
    def remove_blocks(self, block_ids): ...


def block_info(n: int) -> ReceivedBlockInfo:
    handle = RecordHandle("/checkpoint/receivedData/0/log-1700000000000-1700000060000", n * 4096, 4000)
    result = ReceivedBlockStoreResult(StreamBlockId(0, 1_700_000_000_000 + n), 100, handle)
    return ReceivedBlockInfo(0, 100, {"offset_ranges": [["events", 0, n * 100, (n + 1) * 100]]}, result)


def run_threads(threads: int, calls: int, add_block) -> float:
    infos = [block_info(n) for n in range(calls)]
    per_thread = [infos[i::threads] for i in range(threads)]
    start = threading.Barrier(threads + 1)

    def work(chunk: list[ReceivedBlockInfo]) -> None:
        start.wait()
        for info in chunk:
            add_block(info)

    workers = [threading.Thread(target=work, args=(chunk,)) for chunk in per_thread]
    for worker in workers:
        worker.start()
    started = time.perf_counter()
    start.wait()
    for worker in workers:
        worker.join()
    return calls / (time.perf_counter() - started)


def bench_add_block(calls: int, threads: int, tls: tuple[ssl.SSLContext, ssl.SSLContext] | None) -> None:
    secret = new_secret()
    tracker = CountingTracker()
    direct = run_threads(threads, calls, tracker.add_block)
    server = ReceiverTrackerServer(tracker, secret, ssl_context=tls and tls[0]).start()
    endpoint = RemoteTrackerEndpoint.connect(
        *server.address, secret, ssl_context=tls and tls[1], server_hostname="localhost"
    )
    try:
        endpoint.register_receiver(0, "Bench", "localhost", "0", NoControl())
        run_threads(threads, min(calls, 1000), endpoint.add_block)  # warm up
        remote = run_threads(threads, calls, endpoint.add_block)
        endpoint.deregister_receiver(0, "benchmark over", "")
    finally:
        endpoint.close()
        server.stop()
    print(
        f"add_block  threads={threads:<2} socket {remote:>10,.0f} calls/s   "
        f"in-process {direct:>12,.0f} calls/s   ratio {remote / direct:.4f}"
    )


def bench_fetch(block_mb: int, fetches: int, tls: tuple[ssl.SSLContext, ssl.SSLContext] | None) -> None:
    secret = new_secret()
    block = os.urandom(block_mb * 1024 * 1024)
    size_mb = len(block) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "block.bin"
        path.write_bytes(block)
        path.read_bytes()  # warm the page cache
        started = time.perf_counter()
        for _ in range(fetches):
            assert len(path.read_bytes()) == len(block)
        local = fetches * size_mb / (time.perf_counter() - started)

    server = BlockServer(
        {"input-0-1": block}.get, secret, host="127.0.0.1", ssl_context=tls and tls[0]
    ).start()
    fetcher = BlockFetcher(secret, ssl_context=tls and tls[1])
    host, port = server.address
    try:
        if tls:
            # The pooled fetcher checks host names against the certificate's "localhost".
            host = "localhost"
        fetcher.fetch(host, port, "input-0-1")  # connect and warm up
        started = time.perf_counter()
        for _ in range(fetches):
            assert fetcher.fetch(host, port, "input-0-1") == block
        pooled = fetches * size_mb / (time.perf_counter() - started)
        started = time.perf_counter()
        for _ in range(fetches):
            data = fetch_block(host, port, secret, "input-0-1", ssl_context=tls and tls[1])
            assert data == block
        fresh = fetches * size_mb / (time.perf_counter() - started)
    finally:
        fetcher.close()
        server.stop()
    print(
        f"fetch {block_mb} MB  kept connection {pooled:>8,.0f} MB/s   "
        f"new connection each {fresh:>8,.0f} MB/s   "
        f"local file {local:>8,.0f} MB/s   ratios {pooled / local:.3f} / {fresh / local:.3f}"
    )


def tls_contexts(directory: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise SystemExit("--tls needs an openssl executable")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-keyout", str(key),
         "-out", str(cert), "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(cert))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--threads", default="1,4")
    parser.add_argument("--block-mb", type=int, default=20)
    parser.add_argument("--fetches", type=int, default=20)
    parser.add_argument("--tls", action="store_true", help="run both over TLS (self-signed, made now)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tls = tls_contexts(Path(tmp)) if args.tls else None
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
            f"{'TLS' if tls else 'plain TCP'} on 127.0.0.1"
        )
        for threads in (int(t) for t in args.threads.split(",")):
            bench_add_block(args.calls, threads, tls)
        bench_fetch(args.block_mb, args.fetches, tls)


if __name__ == "__main__":
    main()
