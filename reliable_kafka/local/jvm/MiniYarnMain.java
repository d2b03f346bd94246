/*
 * A YARN cluster for tests: Hadoop's MiniYARNCluster (one ResourceManager, N NodeManagers) in one
 * JVM, run by reliable_kafka/local/yarn.py. Hadoop's own MiniHadoopClusterManager cannot be used:
 * its MapReduce half fails on the shaded minicluster jar (no LocalContainerLauncher).
 *
 * Once every NodeManager has registered it writes the cluster's configuration (the ResourceManager's
 * addresses are random ports, known only now) as yarn-site.xml and core-site.xml into -confDir, for
 * HADOOP_CONF_DIR, then a one-line "details" file the caller waits for. SIGTERM stops the cluster
 * (its NodeManagers kill their containers) through the JVM's shutdown hook.
 *
 * Arguments: -confDir DIR -details FILE [-nodemanagers N] [-nodemanagerMemoryMb MB]
 *            [-nodemanagerVcores N] [-defaultFs URI] [-conf key=value]...
 */
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.CountDownLatch;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public final class MiniYarnMain {
  private MiniYarnMain() {}

  public static void main(String[] args) throws Exception {
    File confDir = null;
    File details = null;
    int nodeManagers = 2;
    int memoryMb = 3072;
    int vcores = 4;
    String defaultFs = "file:///";
    YarnConfiguration conf = new YarnConfiguration();
    // The capacity scheduler finds no queue without these: "missing child queue names for root".
    conf.set("yarn.scheduler.capacity.root.queues", "default");
    conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
    // Spark's containers are small (512 MB heaps) and its application masters take half the
    // cluster at most, so that an application's executors always find room.
    conf.setInt("yarn.scheduler.minimum-allocation-mb", 256);
    conf.setInt("yarn.scheduler.maximum-allocation-mb", 6144);
    conf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "0.5");
    for (int i = 0; i < args.length; i += 2) {
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException("option without a value: " + args[i]);
      }
      String value = args[i + 1];
      switch (args[i]) {
        case "-confDir": confDir = new File(value); break;
        case "-details": details = new File(value); break;
        case "-nodemanagers": nodeManagers = Integer.parseInt(value); break;
        case "-nodemanagerMemoryMb": memoryMb = Integer.parseInt(value); break;
        case "-nodemanagerVcores": vcores = Integer.parseInt(value); break;
        case "-defaultFs": defaultFs = value; break;
        case "-conf": {
          int equals = value.indexOf('=');
          if (equals < 1) {
            throw new IllegalArgumentException("-conf takes key=value, not " + value);
          }
          conf.set(value.substring(0, equals), value.substring(equals + 1));
          break;
        }
        default: throw new IllegalArgumentException("unknown option " + args[i]);
      }
    }
    if (confDir == null || details == null) {
      throw new IllegalArgumentException("-confDir and -details are required");
    }
    conf.set("fs.defaultFS", defaultFs);
    // MiniYARNCluster sizes its NodeManagers from these, not from yarn.nodemanager.resource.*.
    conf.setInt("yarn.minicluster.yarn.nodemanager.resource.memory-mb", memoryMb);
    conf.setInt(YarnConfiguration.NM_PMEM_MB, memoryMb);
    conf.setInt(YarnConfiguration.NM_VCORES, vcores);

    MiniYARNCluster cluster = new MiniYARNCluster("reliable-kafka", nodeManagers, 1, 1);
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      cluster.stop();
      stopped.countDown();
    }, "stop-mini-yarn"));
    cluster.init(conf);
    cluster.start();
    if (!cluster.waitForNodeManagersToConnect(120_000)) {
      throw new IllegalStateException(nodeManagers + " NodeManagers did not register within 120 s");
    }
    Configuration running = cluster.getConfig();
    Files.createDirectories(confDir.toPath());
    writeXml(running, new File(confDir, "yarn-site.xml"));
    Configuration core = new Configuration(false);
    core.set("fs.defaultFS", defaultFs);
    writeXml(core, new File(confDir, "core-site.xml"));
    String line = "resourcemanager=" + running.get(YarnConfiguration.RM_ADDRESS)
        + " webapp=" + running.get(YarnConfiguration.RM_WEBAPP_ADDRESS)
        + " nodemanagers=" + nodeManagers + "\n";
    writeAtomically(line.getBytes(StandardCharsets.UTF_8), details);
    System.out.println("MiniYARNCluster up: " + line.trim());
    stopped.await();
  }

  private static void writeXml(Configuration conf, File target) throws IOException {
    java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
    conf.writeXml(bytes);
    writeAtomically(bytes.toByteArray(), target);
  }

  /** Written beside, then renamed: a reader never sees half a file. */
  private static void writeAtomically(byte[] content, File target) throws IOException {
    File staged = new File(target.getParentFile(), "." + target.getName() + ".tmp");
    try (OutputStream out = new FileOutputStream(staged)) {
      out.write(content);
    }
    Files.move(staged.toPath(), target.toPath(), StandardCopyOption.ATOMIC_MOVE);
  }
}
