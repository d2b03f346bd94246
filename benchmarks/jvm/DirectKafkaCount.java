import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.StringJoiner;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.streaming.Durations;
import org.apache.spark.streaming.api.java.JavaInputDStream;
import org.apache.spark.streaming.api.java.JavaStreamingContext;
import org.apache.spark.streaming.kafka010.ConsumerStrategies;
import org.apache.spark.streaming.kafka010.HasOffsetRanges;
import org.apache.spark.streaming.kafka010.KafkaUtils;
import org.apache.spark.streaming.kafka010.LocationStrategies;
import org.apache.spark.streaming.kafka010.OffsetRange;

/**
 * Spark's own JVM direct stream over backlogs, for benchmarks/direct_bench.py (run there with
 * {@code spark-submit --class DirectKafkaCount --jars <the connector's jars> <this app's jar> ...}).
 *
 * <pre>
 * DirectKafkaCount BOOTSTRAP TOPIC[,TOPIC...] PARTITIONS EXPECTED BATCH_MS REPORT EXECUTORS
 * </pre>
 *
 * <p>One SparkContext; before the first topic it waits until EXECUTORS executors registered (0 for a
 * local master), so no window holds executor start-up. Then each topic in turn, in a
 * StreamingContext of its own (the first cold: a fresh JVM and executors; the others warm): {@code
 * KafkaUtils.createDirectStream} (PreferConsistent, Assign of partitions 0..PARTITIONS-1 from
 * offset 0) and in {@code foreachRDD} each batch's records counted by reading them (a KafkaRDD's
 * own {@code count()} sums its offset ranges without reading Kafka: it would measure no reading),
 * until EXPECTED records were counted. Per topic, one JSON line appended to REPORT: the seconds from
 * {@code ssc.start()} to the batch that counted the last record, the records, the batches that held
 * records, this JVM's CPU seconds over that window (all its threads: the driver, and the executor
 * too with a local master), the JVM's uptime at {@code ssc.start()}, and every batch's offset
 * ranges as [partition, from, until].
 */
@SuppressWarnings("deprecation") // Spark 4 deprecates DStreams, the very thing measured here.
public final class DirectKafkaCount {
  private static final long WAIT_S = 1800;
  private static final long EXECUTORS_WAIT_MS = 120_000;

  /** One topic's batches, from the streaming scheduler's thread. */
  private static final class Batches {
    private final long expected;
    private final CountDownLatch done = new CountDownLatch(1);
    private final List<long[]> ranges = new ArrayList<>();
    private final long startedNanos = System.nanoTime();
    private final long startedCpuNanos = processCpuNanos();
    private long counted;
    private int batches;
    private long doneNanos;
    private long doneCpuNanos;

    Batches(long expected) {
      this.expected = expected;
    }

    /** One batch: its offset ranges, then its records counted by reading them. */
    void count(JavaRDD<ConsumerRecord<byte[], byte[]>> rdd) {
      OffsetRange[] batchRanges = ((HasOffsetRanges) rdd.rdd()).offsetRanges();
      long records = rdd.mapPartitions(DirectKafkaCount::recordsIn).fold(0L, Long::sum);
      synchronized (this) {
        if (records > 0) {
          batches++;
        }
        for (OffsetRange r : batchRanges) {
          if (r.count() > 0) {
            ranges.add(new long[] {r.partition(), r.fromOffset(), r.untilOffset()});
          }
        }
        counted += records;
        if (counted >= expected && doneNanos == 0) {
          doneNanos = System.nanoTime();
          doneCpuNanos = processCpuNanos();
          done.countDown();
        }
      }
    }

    synchronized String json(boolean finished, long jvmUpMs) {
      StringJoiner spans = new StringJoiner(",", "[", "]");
      for (long[] r : ranges) {
        spans.add("[" + r[0] + "," + r[1] + "," + r[2] + "]");
      }
      return String.format(
          Locale.ROOT,
          "{\"finished\":%b,\"seconds\":%.6f,\"records\":%d,\"batches\":%d,\"driver_jvm_s\":%.6f,"
              + "\"jvm_up_s\":%.3f,\"ranges\":%s}%n",
          finished,
          (doneNanos - startedNanos) / 1e9,
          counted,
          batches,
          (doneCpuNanos - startedCpuNanos) / 1e9,
          jvmUpMs / 1e3,
          spans);
    }
  }

  private DirectKafkaCount() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 7) {
      System.err.println(
          "usage: DirectKafkaCount BOOTSTRAP TOPIC[,TOPIC...] PARTITIONS EXPECTED BATCH_MS REPORT"
              + " EXECUTORS");
      System.exit(2);
    }
    int partitions = Integer.parseInt(args[2]);
    long expected = Long.parseLong(args[3]);
    long batchMs = Long.parseLong(args[4]);
    Path report = Path.of(args[5]);

    JavaSparkContext sc = new JavaSparkContext(new SparkConf().setAppName("direct-kafka-count"));
    sc.setLogLevel("ERROR");
    try {
      awaitExecutors(sc, Integer.parseInt(args[6]));
      for (String topic : args[1].split(",")) {
        String line = readTopic(sc, args[0], topic, partitions, expected, batchMs);
        Files.writeString(report, line, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
      }
    } finally {
      sc.stop();
    }
  }

  private static String readTopic(
      JavaSparkContext sc, String brokers, String topic, int partitions, long expected, long batchMs)
      throws InterruptedException {
    JavaStreamingContext ssc = new JavaStreamingContext(sc, Durations.milliseconds(batchMs));
    Map<String, Object> params = new HashMap<>();
    params.put("bootstrap.servers", brokers);
    params.put("group.id", "direct-kafka-count-" + topic);
    params.put("enable.auto.commit", false);
    params.put("key.deserializer", ByteArrayDeserializer.class);
    params.put("value.deserializer", ByteArrayDeserializer.class);
    Map<TopicPartition, Long> from = new HashMap<>();
    for (int p = 0; p < partitions; p++) {
      from.put(new TopicPartition(topic, p), 0L);
    }
    JavaInputDStream<ConsumerRecord<byte[], byte[]>> stream =
        KafkaUtils.createDirectStream(
            ssc,
            LocationStrategies.PreferConsistent(),
            ConsumerStrategies.<byte[], byte[]>Assign(from.keySet(), params, from));
    long jvmUpMs = ManagementFactory.getRuntimeMXBean().getUptime();
    Batches batches = new Batches(expected);
    // Runs on the driver only, and without a checkpoint nothing serializes the DStream graph.
    stream.foreachRDD(batches::count);
    ssc.start();
    boolean finished = batches.done.await(WAIT_S, TimeUnit.SECONDS);
    // Batches still running could repeat a range: let them end before the ranges are reported.
    ssc.stop(false, true);
    return batches.json(finished, jvmUpMs);
  }

  private static Iterator<Long> recordsIn(Iterator<ConsumerRecord<byte[], byte[]>> records) {
    long n = 0;
    while (records.hasNext()) {
      records.next();
      n++;
    }
    return List.of(n).iterator();
  }

  private static void awaitExecutors(JavaSparkContext sc, int executors)
      throws InterruptedException {
    long deadline = System.currentTimeMillis() + EXECUTORS_WAIT_MS;
    // getExecutorInfos() lists the driver too.
    while (sc.sc().statusTracker().getExecutorInfos().length - 1 < executors) {
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException(executors + " executors did not register in 120 s");
      }
      Thread.sleep(100);
    }
  }

  private static long processCpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }
}
