"""A fault campaign: minutes of seeded random kills and outages against a running stream.

    python benchmarks/chaos.py [--minutes 20] [--rounds N] [--seed N] [--min-gap 2] [--max-gap 12]
        [--faults kind,kind,...] [--recovery-bound 60] [--rate 200] [--work-dir DIR]
        [--spark local-cluster|hosts] [--kafka 3.9|4]

A user-style application (tests/e2e/cluster_child.py: ``createStream`` with its receiver on an
executor of ``local-cluster[2,2,1024]``, receiver WAL on, checkpointing, ``getOrCreate``, a sink that
appends each batch's records in one fsync'ed write) runs in a process session of its own against a
real local ZooKeeper + Kafka 3.9, its group's offsets in ZooKeeper (``--kafka 4``: a KRaft broker
and no ZooKeeper anywhere, the group and its offsets kept by Kafka's group coordinator), while a
producer sends numbered messages at ``--rate`` per second.
Every ``--min-gap``..``--max-gap`` seconds one fault hits it, each kind below once per round in an
order drawn by a generator seeded with ``--seed``; with ``--rounds N`` the campaign ends after N
rounds (every kind N times) when that comes before its minutes are up:

    driver-kill       SIGKILL the driver's whole session (driver, JVMs, Python workers); start again
    driver-term       SIGTERM the driver (graceful stop), start it again
    executor-kill     SIGKILL the executor JVM that runs the receiver, with its Python workers
    broker-kill       SIGKILL the broker, start it again after 0-20 s
    zookeeper-kill    SIGKILL ZooKeeper, start it again after 0-20 s (not on ``--kafka 4``)
    session-expire    SIGSTOP the receiver executor's Python workers past the group's session
                      timeout (a long GC pause): the receiver's ZooKeeper session expires under it,
                      or (``--kafka 4``) the group coordinator evicts it and rebalances
    wal-disk-full     fill the checkpoint's filesystem (a small tmpfs holding both WALs), free it
                      after 2-10 s
    wal-disk-stall    SIGSTOP every writer of the checkpoint's filesystem for 2-10 s (the disk
                      answers nothing; neither fault kills a process, so nothing restarts them)
    host-loss         (``--spark hosts`` only) the host of the receiver's executor dies: every
                      process of it SIGKILLed and its private files gone; it comes back empty

``--spark hosts`` runs the application on the several-hosts cluster (LocalSparkHosts: two
workers, each a host with its own address, /dev/shm and local dirs; needs root) instead of
``local-cluster[2,2,1024]``.

Afterwards it stops the producer, waits for the sink to hold every acknowledged message, stops the
application gracefully and audits (benchmarks/chaos_audit.py): no acknowledged message lost; what
was delivered again after each fault fits in one block per partition; committed offsets (sampled
every second in ZooKeeper, or from the group coordinator) never moved backwards; within
``--recovery-bound`` seconds of each fault being lifted (the server started again, the disk freed,
the processes continued; for the driver faults, the replacement application started: Spark's start
of a local-cluster is not timed) every partition delivered a record produced after it; no process
left behind. Faults follow each other without waiting for recovery, so they also land on a driver or
a receiver that is still recovering: a fault hit again within its bound before it recovered is
counted "hit again", and the bound of the one that hit it holds for both. It prints one row per
fault kind (count, recovery p50/max, records delivered again) and the seed, and exits 1 on any
violation: rerun with that ``--seed`` to replay the same sequence of faults (timings on a busy
machine still differ).
The disk faults need root (to mount the tmpfs); without it they are left out, and said so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from chaos_audit import Fault, SinkWatcher, audit, table
from confluent_kafka import KafkaException
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError

from reliable_kafka.kafka.client.topic_partition import TopicAndPartition
from reliable_kafka.kafka.client.zk.paths import offset_path
from reliable_kafka.kafka.offsets.group.offset_store import KafkaOffsetStore
from reliable_kafka.local import LocalCluster
from reliable_kafka.local.spark_hosts import LocalSparkHosts
from tests.e2e.kill_harness import ChildApp, RecordingProducer
from tests.e2e.processes import (
    descendants,
    describe,
    executor_jvm,
    executor_jvm_among,
    kill_tree,
    session_processes,
)
from tests.spark_backends import HOST_CORES, SparkBackend, hosts_backend, local_cluster_backend

logger = logging.getLogger("chaos")

KINDS = [
    "driver-kill",
    "driver-term",
    "executor-kill",
    "broker-kill",
    "zookeeper-kill",
    "session-expire",
    "wal-disk-full",
    "wal-disk-stall",
    "host-loss",
]
DISK_KINDS = {"wal-disk-full", "wal-disk-stall"}
HOSTS_KINDS = {"host-loss"}
ZOOKEEPER_KINDS = {"zookeeper-kill"}
DRIVER_KINDS = {"driver-kill", "driver-term"}
# Faults that need a started application: its receiver, its SIGTERM handler, its WAL writers.
STARTED_KINDS = {"executor-kill", "session-expire", "driver-term", "wal-disk-stall", "host-loss"}
TOPIC = "chaos"
GROUP = "chaos-app"
PARTITIONS = 2
SESSION_TIMEOUT_MS = 6000
ZOOKEEPER_GROUP_PARAMS = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    # A relaunched receiver waits for its dead predecessor's owner nodes to expire (a session
    # timeout): retry the claim for longer than that.
    "rebalance.backoff.ms": "1000",
    "rebalance.max.retries": "20",
}
# A killed receiver's membership expires after the session timeout: the relaunched one joins
# then. Heartbeats come from librdkafka's own thread, so only a stopped process misses them.
KAFKA_GROUP_PARAMS = {"session.timeout.ms": str(SESSION_TIMEOUT_MS), "heartbeat.interval.ms": "1000"}
TMPFS_BYTES = 256 * 1024 * 1024


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="end after this many rounds of every kind, if before --minutes (default: minutes only)",
    )
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument("--min-gap", type=float, default=2.0, help="seconds between faults, at least")
    parser.add_argument("--max-gap", type=float, default=12.0, help="seconds between faults, at most")
    parser.add_argument("--faults", default=",".join(KINDS), help="comma-separated kinds to draw from")
    parser.add_argument("--recovery-bound", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=200, help="messages per second")
    parser.add_argument("--work-dir", type=Path, default=None, help="kept after the run when given")
    parser.add_argument(
        "--spark",
        choices=("local-cluster", "hosts"),
        default="local-cluster",
        help="the Spark cluster: local-cluster[2,2,1024], or two hosts of LocalSparkHosts (root)",
    )
    parser.add_argument(
        "--kafka",
        choices=("3.9", "4"),
        default="3.9",
        help="the broker: 3.9 with ZooKeeper (offsets in ZooKeeper), or 4 (KRaft; offsets in Kafka)",
    )
    args = parser.parse_args(argv)
    unknown = set(args.faults.split(",")) - set(KINDS)
    if unknown:
        parser.error(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    return args


@contextlib.contextmanager
def small_tmpfs(path: Path, size_bytes: int) -> Iterator[bool]:
    """A tmpfs at ``path`` (True), or a plain directory when mounting is not possible (False)."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = False
    if os.geteuid() == 0 and shutil.which("mount"):
        mount = ["mount", "-t", "tmpfs", "-o", f"size={size_bytes},mode=0700", "tmpfs", str(path)]
        mounted = subprocess.run(mount, capture_output=True, check=False, timeout=30).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False, timeout=30)


class OffsetSampler(threading.Thread):
    """Reads the group's committed offsets every second; any that moved backwards is a violation.
    A store that does not answer (its server is down) is skipped for that second."""

    def __init__(self) -> None:
        super().__init__(name="offset-sampler", daemon=True)
        self._stop_event = threading.Event()
        self.last: dict[int, int] = {}
        self.samples = 0
        self.regressions: list[str] = []

    def committed(self) -> dict[int, int] | None:
        raise NotImplementedError

    def close(self) -> None:
        """Release the store's client."""

    def run(self) -> None:
        while not self._stop_event.wait(1.0):
            offsets = self.committed()
            if offsets is None:
                continue
            for p, offset in offsets.items():
                if offset < self.last.get(p, -1):
                    self.regressions.append(
                        f"committed offset of partition {p} moved back {self.last[p]} -> {offset}"
                    )
                self.last[p] = max(offset, self.last.get(p, offset))
            self.samples += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join()
        self.close()


class ZooKeeperOffsetSampler(OffsetSampler):
    def __init__(self, connect: str) -> None:
        super().__init__()
        self._zk = KazooClient(hosts=connect, timeout=10.0)
        self._zk.start_async()

    def committed(self) -> dict[int, int] | None:
        if self._zk.state != KazooState.CONNECTED:
            return None
        offsets = {}
        for p in range(PARTITIONS):
            with contextlib.suppress(KazooException, NoNodeError):
                data, _ = self._zk.get(offset_path(GROUP, TopicAndPartition(TOPIC, p)))
                offsets[p] = int(data)
        return offsets

    def close(self) -> None:
        self._zk.stop()
        self._zk.close()


class KafkaOffsetSampler(OffsetSampler):
    """The group coordinator's committed offsets (OffsetFetch from a consumer that never joins
    the group), as the lag command reads them; partitions without a commit yet are left out."""

    def __init__(self, cluster: LocalCluster) -> None:
        super().__init__()
        self._store = KafkaOffsetStore.standalone(
            cluster.client_config(), GROUP, owns=lambda _tp: False, retry_for_s=5.0
        )

    def committed(self) -> dict[int, int] | None:
        try:
            fetched = self._store.fetch(TopicAndPartition(TOPIC, p) for p in range(PARTITIONS))
        except KafkaException:  # the broker is down (a fault): no sample this second
            return None
        return {tp.partition: offset for tp, offset in fetched.items() if offset is not None}

    def close(self) -> None:
        self._store.close()


class Campaign:
    def __init__(
        self,
        args: argparse.Namespace,
        work: Path,
        cluster: LocalCluster,
        disk: bool,
        spark: SparkBackend,
    ) -> None:
        self.args, self.work, self.cluster, self.spark = args, work, cluster, spark
        self.seed: int = args.seed
        self.rng = random.Random(self.seed)
        self.checkpoint = work / "checkpoint"
        self.output = work / "sink.jsonl"
        self.logs = work / "logs"
        self.logs.mkdir(exist_ok=True)
        self.kinds = [
            k
            for k in args.faults.split(",")
            if (disk or k not in DISK_KINDS)
            and (spark.hosts is not None or k not in HOSTS_KINDS)
            and (cluster.has_zookeeper or k not in ZOOKEEPER_KINDS)
        ]
        self.apps: list[ChildApp] = []
        self.faults: list[Fault] = []
        self._round: list[str] = []
        self.notes: list[str] = []  # violations seen while running (an application that died)
        self.watcher = SinkWatcher(self.output, PARTITIONS)
        self.injectors: dict[str, Callable[[], str]] = {
            "driver-kill": self.driver_kill,
            "driver-term": self.driver_term,
            "executor-kill": self.executor_kill,
            "broker-kill": self.broker_kill,
            "zookeeper-kill": self.zookeeper_kill,
            "session-expire": self.session_expire,
            "wal-disk-full": self.disk_full,
            "wal-disk-stall": self.disk_stall,
            "host-loss": self.host_loss,
        }

    @property
    def app(self) -> ChildApp:
        return self.apps[-1]

    def start_app(self, *, wait: bool = False) -> None:
        """Launch the next run; the campaign goes on while it starts (the next fault may hit a
        driver that is still recovering, or a receiver that is being launched)."""
        if self.cluster.has_zookeeper:
            zk, params = self.cluster.zookeeper_connect, ZOOKEEPER_GROUP_PARAMS
        else:  # --zk "": the group lives in Kafka, reached through bootstrap.servers
            zk, params = "", {**KAFKA_GROUP_PARAMS, **self.cluster.client_config()}
        args = [
            "--zk", zk,
            "--group", GROUP,
            "--topics", TOPIC,
            "--checkpoint", str(self.checkpoint),
            "--output", str(self.output),
            "--kafka-params", json.dumps(params),
            "--master", self.spark.master,
            *(arg for entry in self.spark.conf for arg in ("--conf", entry)),
        ]  # fmt: skip
        self.app_launched_at = time.time()
        app = ChildApp(len(self.apps), args, self.logs, module="tests.e2e.cluster_child")
        self.apps.append(app)
        threading.Thread(target=self._lift_driver_faults_once_started, args=(app,), daemon=True).start()
        if wait:
            app.wait_started(300)

    def _lift_driver_faults_once_started(self, app: ChildApp) -> None:
        """A driver fault is lifted when a replacement has started: Spark's own start of a
        local-cluster (two executor JVMs), 30-40 s on a busy 2-core machine, is not the stream's
        recovery; the start-up time goes into the fault's detail instead."""
        launched = time.time()
        while not app.started.wait(1.0):
            if app.process.poll() is not None:
                return  # killed while starting: the next run lifts its faults
        for fault in self.faults:
            if fault.kind in DRIVER_KINDS and fault.lifted_at is None:
                fault.detail += f"; run {app.run} started {time.time() - launched:.0f} s after launch"
                self.lift(fault)

    def ensure_app_running(self) -> None:
        """An application that ended by itself is a violation; it is started again to go on."""
        if self.app.process.poll() is not None:
            code = self.app.process.returncode
            self.faults_note(f"run {self.app.run} exited by itself with {code}: {self.app.warnings(5)}")
            self.start_app()

    def faults_note(self, text: str) -> None:
        logger.error("%s", text)
        self.notes.append(text)

    # -- faults -------------------------------------------------------------------------------

    def driver_kill(self) -> str:
        self.app.kill()
        self.start_app()
        return f"run {self.app.run - 1} killed"

    def driver_term(self) -> str:
        code = self.app.stop_gracefully(300)
        if code != 0:
            self.faults_note(f"run {self.app.run} stopped gracefully with exit code {code}")
        self.start_app()
        return f"run {self.app.run - 1} stopped with {code}"

    def next_kind(self, *, ready: bool) -> str:
        """Every kind once per round, in a seeded random order, so that a short campaign still
        meets each of them. While the application is still starting, the faults that need it
        started wait for a later turn."""
        if not self._round:
            self._round = list(self.kinds)
            self.rng.shuffle(self._round)
        for i, kind in enumerate(self._round):
            if ready or kind not in STARTED_KINDS:
                return self._round.pop(i)
        # Only faults that need it started are left this round: let it start (killing it again
        # and again would starve them).
        self.app.wait_started(300)
        self._wait_for_receiver(120)
        return self._round.pop(0)

    def lift(self, fault: Fault | None = None) -> None:
        """The fault is over: recovery is timed from now, up to a record produced after it."""
        fault = fault or self.faults[-1]
        fault.lifted_at = time.time()
        highest: dict[int, int] = {}
        for p, o in list(self.producer.acked):
            highest[p] = max(o, highest.get(p, -1))
        fault.baseline = highest
        self.watcher.watch(fault)

    def _wait_for_receiver(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while self._receiver_jvm() is None and time.monotonic() < deadline:
            time.sleep(0.5)

    def _receiver_jvm(self) -> int | None:
        executor = self.watcher.receiver_executor(since=self.app_launched_at)
        if executor is None:
            return None
        if self.spark.hosts is None:
            return executor_jvm(self.app.process.pid, executor)
        # The hosts' workers start the executors, outside the application's session; executor
        # ids repeat across runs, so the run's application id tells them apart.
        if not self.watcher.app_ids:
            return None
        pids = [pid for host in self.spark.hosts.hosts for pid in host.processes()]
        return executor_jvm_among(pids, executor, self.watcher.app_ids[-1])

    def executor_kill(self) -> str:
        jvm = self._receiver_jvm()
        if jvm is None:
            self.lift()
            return "no receiver executor found"
        victims = kill_tree(jvm)
        self.lift()
        return f"{len(victims)} processes of the receiver's executor"

    def session_expire(self) -> str:
        jvm = self._receiver_jvm()
        if jvm is None:
            self.lift()
            return "no receiver executor found"
        workers = descendants(jvm)
        pause = SESSION_TIMEOUT_MS / 1000 + 4
        self._signal_all(workers, signal.SIGSTOP)
        try:
            time.sleep(pause)
        finally:
            self._signal_all(workers, signal.SIGCONT)
            self.lift()
        return f"{len(workers)} Python workers stopped {pause:.0f} s"

    def host_loss(self) -> str:
        jvm = self._receiver_jvm()
        hosts = self.spark.hosts
        assert hosts is not None
        (lost,) = [h.index for h in hosts.hosts if jvm is not None and jvm in h.processes()] or [None]
        if lost is None:
            self.lift()
            return "no receiver executor found"
        hosts.lose_host(lost)
        hosts.await_host_gone(lost)
        hosts.restart_host(lost)
        self.lift()
        return f"host {lost} lost with the receiver's executor, back empty"

    def broker_kill(self) -> str:
        down = self.rng.uniform(0, 20)
        self.cluster.kill_broker()
        time.sleep(down)
        self.cluster.start_broker()
        self.lift()
        return f"down {down:.1f} s"

    def zookeeper_kill(self) -> str:
        down = self.rng.uniform(0, 20)
        self.cluster.kill_zookeeper()
        time.sleep(down)
        self.cluster.start_zookeeper()
        self.lift()
        return f"down {down:.1f} s"

    def disk_full(self) -> str:
        hold = self.rng.uniform(2, 10)
        filler = self.checkpoint / "filler"
        free = shutil.disk_usage(self.checkpoint).free
        with filler.open("wb") as f, contextlib.suppress(OSError):
            os.posix_fallocate(f.fileno(), 0, free)
        try:
            time.sleep(hold)
        finally:
            filler.unlink()
            self.lift()
        return f"{free >> 20} MiB filled for {hold:.1f} s"

    def disk_stall(self) -> str:
        """Every process with a file open on the checkpoint filesystem stops, as a process
        blocked in a write to a disk that does not answer would; the rest of it runs on."""
        hold = self.rng.uniform(2, 10)
        writers = self._writers_of(self.checkpoint)
        self._signal_all(writers, signal.SIGSTOP)
        try:
            time.sleep(hold)
        finally:
            self._signal_all(writers, signal.SIGCONT)
            self.lift()
        return f"{len(writers)} writers stalled {hold:.1f} s"

    def _writers_of(self, directory: Path) -> list[int]:
        prefix = str(directory.resolve())
        found = []
        for pid in session_processes(self.app.process.pid):
            with contextlib.suppress(OSError):
                fds = Path(f"/proc/{pid}/fd")
                if any(os.readlink(fds / fd).startswith(prefix) for fd in os.listdir(fds)):
                    found.append(pid)
        return found

    @staticmethod
    def _lingering(app: ChildApp, grace_s: float = 60.0) -> list[int]:
        """What is left of an application's session once its JVMs had ``grace_s`` to exit."""
        deadline = time.monotonic() + grace_s
        while (pids := session_processes(app.process.pid)) and time.monotonic() < deadline:
            time.sleep(0.5)
        return pids

    @staticmethod
    def _signal_all(pids: list[int], signum: int) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> int:
        self.cluster.create_topic(TOPIC, PARTITIONS)
        self.producer = producer = RecordingProducer(
            self.cluster, TOPIC, PARTITIONS, max(1, self.args.rate // 10)
        )
        sampler: OffsetSampler = (
            ZooKeeperOffsetSampler(self.cluster.zookeeper_connect)
            if self.cluster.has_zookeeper
            else KafkaOffsetSampler(self.cluster)
        )
        self.watcher.start()
        sampler.start()
        self.start_app(wait=True)
        producer.start()
        started = time.monotonic()
        end = started + self.args.minutes * 60
        rounds_end = None if self.args.rounds is None else self.args.rounds * len(self.kinds)
        while rounds_end is None or len(self.faults) < rounds_end:
            gap = self.rng.uniform(self.args.min_gap, self.args.max_gap)
            if time.monotonic() + gap > end:
                break
            time.sleep(gap)
            self.ensure_app_running()
            kind = self.next_kind(ready=self.app.started.is_set() and self._receiver_jvm() is not None)
            fault = Fault(kind, time.time())
            self.faults.append(fault)
            fault.detail = self.injectors[kind]()
            print(
                f"{time.monotonic() - started:7.1f} s  fault {len(self.faults) - 1}: {kind} ({fault.detail})",
                flush=True,
            )
        self.ensure_app_running()
        self.app.wait_started(300)
        # Messages keep coming until the last fault has recovered (or had its bound): its
        # recovery is timed up to a record produced after it.
        last = self.faults[-1] if self.faults else None
        give_up = time.time() + 300
        while last is not None and last.recovered_at is None and time.time() < give_up:
            if last.lifted_at is not None and time.time() > last.lifted_at + self.args.recovery_bound:
                break
            time.sleep(1)
        producer.finish()
        acked = set(producer.acked)
        drain_deadline = time.monotonic() + 300
        while time.monotonic() < drain_deadline and not acked <= self.watcher.delivered():
            time.sleep(1)
        self.ensure_app_running()
        code = self.app.stop_gracefully(300)
        if code != 0:
            self.faults_note(f"the final graceful stop exited with {code}")
        self.watcher.stop()
        sampler.stop()
        if self.spark.hosts is None:  # the hosts keep theirs under the campaign's directory
            move_spark_worker_dirs(self.watcher.app_ids, self.logs)
        leftovers = [
            f"run {app.run}: {describe(pids)}" for app in self.apps if (pids := self._lingering(app))
        ]
        result = audit(
            self.watcher,
            acked,
            self.faults,
            recovery_bound_s=self.args.recovery_bound,
            offset_regressions=sampler.regressions,
            notes=self.notes,
            leftovers=leftovers,
        )
        print(table(self.faults, result, self.seed, self.kinds))
        print(
            f"{self.args.minutes:g} min, {len(acked)} messages acknowledged, "
            f"{len(self.apps)} application runs, {sampler.samples} offset samples, "
            f"{len(self.watcher.job_errors)} failed batch jobs"
        )
        for violation in result.violations:
            print(f"VIOLATION: {violation}")
        return 0 if result.passed else 1


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1 << 31)
    replay = f"--seed {args.seed} --spark {args.spark} --kafka {args.kafka}"
    print(f"chaos seed {args.seed} (rerun with {replay})", flush=True)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="chaos-"))
    work.mkdir(parents=True, exist_ok=True, mode=0o700)
    code = 1
    try:
        with small_tmpfs(work / "checkpoint", TMPFS_BYTES) as disk:
            if not disk:
                print("no tmpfs (needs root and mount): the WAL disk faults are left out", flush=True)
            with (
                LocalCluster(work / "cluster", kafka=args.kafka, keep_work_dir=True) as cluster,
                spark_cluster(args, work) as spark,
            ):
                campaign = Campaign(args, work, cluster, disk, spark)
                try:
                    code = campaign.run()
                finally:
                    for app in campaign.apps:
                        app.kill()
        leftover = [pid for pid in _pids_mentioning(str(work))]
        if leftover:
            print(f"VIOLATION: left behind after the cluster stopped: {describe(leftover)}")
            code = 1
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return code


@contextlib.contextmanager
def spark_cluster(args: argparse.Namespace, work: Path) -> Iterator[SparkBackend]:
    """The campaign's Spark cluster: local-cluster, which each run starts itself, or the hosts."""
    if args.spark == "local-cluster":
        yield local_cluster_backend()
        return
    with LocalSparkHosts(work / "spark-hosts", hosts=2, cores=HOST_CORES, memory_mb=1024) as hosts:
        yield hosts_backend(hosts)


def move_spark_worker_dirs(app_ids: list[str], logs: Path) -> None:
    """local-cluster's workers keep each application's executor logs under ``SPARK_HOME/work``:
    into the campaign's logs with them (the receivers log there)."""
    import pyspark  # noqa: PLC0415

    work = Path(pyspark.__file__).resolve().parent / "work"
    for app_id in app_ids:
        with contextlib.suppress(OSError):
            shutil.move(work / app_id, logs / app_id)


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return pids


def _pids_mentioning(text: str) -> list[int]:
    """Processes whose command line names ``text``, other than this one and those that started it."""
    found, mine = [], _ancestors()
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in mine:
            with contextlib.suppress(OSError):
                if text in Path(f"/proc/{name}/cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(name))
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
