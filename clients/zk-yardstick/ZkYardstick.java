// zk-yardstick: the ZooKeeper lock design's cycle driven by ZooKeeper's own Java client, many
// threads at once, to measure what the ensemble can serve (chaoslock issue 30).
//
// One cycle: create an EPHEMERAL_SEQUENTIAL node /yardstick/k<t>/lock- (with its stat, as the
// design's CREATE2 takes its czxid), then delete it. Each thread works under a parent of its own
// (compare's throughput probe: N clients on N keys), so its node is always the lowest: the
// lock is taken at once. Threads share -sessions ZooKeeper sessions, round robin.
//
// Usage: ZkYardstick <connect string> <threads> <sessions> <seconds>
// Prints one JSON line: {"cycles_per_s", "cycles", "errors", "seconds", "clients"}; exits 1 with
// one sentence on stderr when it cannot connect or no cycle completed.
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

public class ZkYardstick {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("zk-yardstick: usage: ZkYardstick <connect string> <threads> <sessions> <seconds>");
            System.exit(2);
        }
        String connect = args[0];
        int threads = Integer.parseInt(args[1]), sessions = Integer.parseInt(args[2]);
        double seconds = Double.parseDouble(args[3]);
        // No SASL: its server principal needs a reverse DNS lookup of each server's address, which
        // in a namespace without DNS waits out the resolver's timeouts before every connect.
        System.setProperty("zookeeper.sasl.client", "false");
        ZooKeeper[] zks = new ZooKeeper[sessions];
        for (int i = 0; i < sessions; i++) {
            CountDownLatch up = new CountDownLatch(1);
            zks[i] = new ZooKeeper(connect, 10000, e -> {
                if (e.getState() == Watcher.Event.KeeperState.SyncConnected) up.countDown();
            });
            if (!up.await(10, TimeUnit.SECONDS)) {
                System.err.println("zk-yardstick: cannot connect to " + connect + " within 10 s");
                System.exit(1);
            }
        }
        ensure(zks[0], "/yardstick");
        for (int t = 0; t < threads; t++) ensure(zks[0], "/yardstick/k" + t);
        AtomicLong cycles = new AtomicLong(), errors = new AtomicLong();
        AtomicReference<String> last = new AtomicReference<>("none");
        long start = System.nanoTime(), end = start + (long) (seconds * 1e9);
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final ZooKeeper zk = zks[t % sessions];
            final String prefix = "/yardstick/k" + t + "/lock-";
            ts[t] = new Thread(() -> {
                byte[] data = new byte[0];
                while (System.nanoTime() < end) {
                    try {
                        Stat stat = new Stat();
                        String path = zk.create(prefix, data, ZooDefs.Ids.OPEN_ACL_UNSAFE,
                                                CreateMode.EPHEMERAL_SEQUENTIAL, stat);
                        zk.delete(path, -1);
                        cycles.incrementAndGet();
                    } catch (Exception e) {
                        errors.incrementAndGet();
                        last.set(e.toString());
                    }
                }
            });
            ts[t].start();
        }
        for (Thread t : ts) t.join();
        double took = (System.nanoTime() - start) / 1e9;
        for (ZooKeeper zk : zks) zk.close();
        if (cycles.get() == 0) {
            System.err.println("zk-yardstick: no cycle completed (" + errors.get() + " errors, last: " + last.get() + ")");
            System.exit(1);
        }
        System.out.printf("{\"cycles_per_s\": %.1f, \"cycles\": %d, \"errors\": %d, \"seconds\": %.3f, \"clients\": %d}%n",
                          cycles.get() / took, cycles.get(), errors.get(), took, threads);
    }

    static void ensure(ZooKeeper zk, String path) throws Exception {
        try {
            zk.create(path, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        } catch (KeeperException.NodeExistsException e) {
            // left by an earlier run: fine
        }
    }
}
