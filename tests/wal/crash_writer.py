"""Child process for the crash test: writes records forever, printing each one once write() returned.

Usage: python crash_writer.py MODE DIRECTORY RUN_ID
MODE is "rolling", "close-after-write" or "batched". Each acknowledged line is "RUN SEQ".
"""

from __future__ import annotations

import random
import sys
import threading

from wal import BatchedWriteAheadLog, FileBasedWriteAheadLog, WriteAheadLog


def payload(run: int, seq: int) -> bytes:
    """Deterministic content, so the parent can check every recovered byte."""
    rng = random.Random(run * 1_000_003 + seq)
    size = rng.choice((0, 10, 100, 1_000, 20_000, 200_000))
    return b"%d:%d:" % (run, seq) + rng.randbytes(size)


def time_of(run: int, seq: int) -> int:
    return run * 1_000_000 + seq * 50  # a new 1 s segment every 20 records


def main() -> None:
    mode, directory, run = sys.argv[1], sys.argv[2], int(sys.argv[3])
    inner = FileBasedWriteAheadLog(
        directory, rolling_interval_s=1, close_file_after_write=(mode == "close-after-write")
    )
    log: WriteAheadLog = BatchedWriteAheadLog(inner) if mode == "batched" else inner
    threads = 4 if mode == "batched" else 1
    out = sys.stdout
    print_lock = threading.Lock()

    def writer(first: int) -> None:
        seq = first
        while True:
            log.write(payload(run, seq), time_of(run, seq))
            with print_lock:
                out.write(f"{run} {seq}\n")
                out.flush()
            seq += threads

    workers = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(threads)]
    for w in workers:
        w.start()
    with print_lock:
        out.write("ready\n")
        out.flush()
    for w in workers:
        w.join()


if __name__ == "__main__":
    main()
