import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
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
import org.apache.spark.streaming.Durations;
import org.apache.spark.streaming.api.java.JavaInputDStream;
import org.apache.spark.streaming.api.java.JavaStreamingContext;
import org.apache.spark.streaming.kafka010.ConsumerStrategies;
import org.apache.spark.streaming.kafka010.HasOffsetRanges;
import org.apache.spark.streaming.kafka010.KafkaUtils;
import org.apache.spark.streaming.kafka010.LocationStrategies;
import org.apache.spark.streaming.kafka010.OffsetRange;

/**
 * Spark's own JVM direct stream over one backlog, for benchmarks/direct_bench.py (run there with
 * {@code spark-submit --class DirectKafkaCount --jars <the connector's jars> <this app's jar> ...}).
 *
 * <pre>
 * DirectKafkaCount BOOTSTRAP TOPIC PARTITIONS EXPECTED BATCH_MS REPORT EXECUTORS
 * </pre>
 *
 * <p>{@code KafkaUtils.createDirectStream} (PreferConsistent, Assign of partitions 0..PARTITIONS-1
 * from offset 0), and in {@code foreachRDD} each batch's records counted by reading them: a
 * KafkaRDD's own {@code count()} sums its offset ranges without reading Kafka, which would measure
 * no reading at all. Before {@code ssc.start()} it waits until EXECUTORS executors registered (0 for
 * a local master), so the window holds reading, not executor start-up. It stops once EXPECTED
 * records were counted, then writes REPORT, one JSON object: the seconds from {@code ssc.start()}
 * to the batch that counted the last record, the records, the batches that held records, this JVM's CPU seconds over that window
 * (all its threads: the driver, and the executor too with a local master), the seconds from the
 * JVM's launch to {@code ssc.start()}, and every batch's offset ranges as [partition, from, until].
 */
@SuppressWarnings("deprecation") // Spark 4 deprecates DStreams, the very thing measured here.
public final class DirectKafkaCount {
  private static final long WAIT_S = 1800;
  private static final long EXECUTORS_WAIT_MS = 120_000;

  private static final CountDownLatch done = new CountDownLatch(1);
  private static final List<long[]> ranges = new ArrayList<>();
  private static long expected;
  private static long counted;
  private static int batches;
  private static long startedNanos;
  private static long startedCpuNanos;
  private static long doneNanos;
  private static long doneCpuNanos;

  private DirectKafkaCount() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 7) {
      System.err.println(
          "usage: DirectKafkaCount BOOTSTRAP TOPIC PARTITIONS EXPECTED BATCH_MS REPORT EXECUTORS");
      System.exit(2);
    }
    String topic = args[1];
    int partitions = Integer.parseInt(args[2]);
    expected = Long.parseLong(args[3]);
    Path report = Path.of(args[5]);

    JavaStreamingContext ssc =
        new JavaStreamingContext(
            new SparkConf().setAppName("direct-kafka-count"),
            Durations.milliseconds(Long.parseLong(args[4])));
    ssc.sparkContext().setLogLevel("ERROR");
    awaitExecutors(ssc, Integer.parseInt(args[6]));

    Map<String, Object> params = new HashMap<>();
    params.put("bootstrap.servers", args[0]);
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
    stream.foreachRDD(DirectKafkaCount::count);

    long jvmUpMs = ManagementFactory.getRuntimeMXBean().getUptime();
    startedCpuNanos = processCpuNanos();
    startedNanos = System.nanoTime();
    ssc.start();
    boolean finished = done.await(WAIT_S, TimeUnit.SECONDS);
    // Batches still running could repeat a range: let them end before the ranges are reported.
    ssc.stop(true, true);
    write(report, finished, jvmUpMs);
  }

  /** One batch: its offset ranges, then its records counted by reading them. */
  private static void count(JavaRDD<ConsumerRecord<byte[], byte[]>> rdd) {
    OffsetRange[] batchRanges = ((HasOffsetRanges) rdd.rdd()).offsetRanges();
    long records = rdd.mapPartitions(DirectKafkaCount::recordsIn).fold(0L, Long::sum);
    synchronized (DirectKafkaCount.class) {
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

  private static Iterator<Long> recordsIn(Iterator<ConsumerRecord<byte[], byte[]>> records) {
    long n = 0;
    while (records.hasNext()) {
      records.next();
      n++;
    }
    return List.of(n).iterator();
  }

  private static void awaitExecutors(JavaStreamingContext ssc, int executors)
      throws InterruptedException {
    long deadline = System.currentTimeMillis() + EXECUTORS_WAIT_MS;
    // getExecutorInfos() lists the driver too.
    while (ssc.sparkContext().sc().statusTracker().getExecutorInfos().length - 1 < executors) {
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

  private static synchronized void write(Path report, boolean finished, long jvmUpMs)
      throws IOException {
    StringJoiner spans = new StringJoiner(",", "[", "]");
    for (long[] r : ranges) {
      spans.add("[" + r[0] + "," + r[1] + "," + r[2] + "]");
    }
    String json =
        String.format(
            Locale.ROOT,
            "{\"finished\":%b,\"seconds\":%.6f,\"records\":%d,\"batches\":%d,\"driver_jvm_s\":%.6f,"
                + "\"startup_s\":%.3f,\"ranges\":%s}%n",
            finished,
            (doneNanos - startedNanos) / 1e9,
            counted,
            batches,
            (doneCpuNanos - startedCpuNanos) / 1e9,
            jvmUpMs / 1e3,
            spans);
    // Written whole, then renamed: the reader never sees half a report.
    Path staged = report.resolveSibling(report.getFileName() + ".tmp");
    Files.writeString(staged, json);
    Files.move(staged, report, StandardCopyOption.ATOMIC_MOVE);
  }
}
