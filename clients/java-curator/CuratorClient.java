// A lock client over the chaoslock client protocol: Apache Curator's InterProcessMutex on ZooKeeper.
//
//   scripts/clients/java-curator.sh      (builds it, writes clients/java-curator/bin/java-curator)
//   chaos run --client clients/java-curator/bin/java-curator --servers zookeeper:3 -n pause-holder
//   chaos run --client clients/java-curator/bin/java-curator --servers zookeeper:3 -n pause-waiter \
//       -o pause_multiple=3 --acquire-timeout 10 [-o recheck_node_after_acquire=true]
//
// One JSON request per line on stdin, one reply per line on stdout, logs on stderr. JSON is read
// and written with Jackson (jackson-databind, which Debian's Curator packages depend on already).
//
// It tests Curator as shipped: a thin shell over InterProcessMutex that adds no safety check of
// its own. When acquire() returns true the lock is taken, whatever ZooKeeper holds by then. A
// check the library does not make is a named option, off by default, read from init's options
// (-o NAME=VALUE) and declared in workloads/external.py (chaos list):
//
//   recheck_node_after_acquire  after acquire(), read our lock node; if it is gone, release()
//                               and answer info. acquire() does not look again once its loop
//                               saw our node first. With this on, a run tests the check too.
//
// The token is the czxid of our lock node, taken from the reply to the library's own create (a
// driver that keeps its Stat), so it needs no read after acquire() and acts on nothing.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.StandardLockInternalsDriver;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.data.Stat;

public class CuratorClient {
    static final ObjectMapper JSON = new ObjectMapper();

    /** InterProcessMutex with its lock node's path in view (getLockPath is protected), and the
     *  Stat of the node it created (through its public LockInternalsDriver constructor). */
    static class Mutex extends InterProcessMutex {
        final StatKeepingDriver driver;
        Mutex(CuratorFramework client, String path) { this(client, path, new StatKeepingDriver()); }
        private Mutex(CuratorFramework client, String path, StatKeepingDriver driver) {
            super(client, path, driver);
            this.driver = driver;
        }
        String node() { return getLockPath(); }
    }

    /** Curator 5.4.0's own createsTheLock (StandardLockInternalsDriver: the same builder chain),
     *  with storingStatIn: the created node's Stat, whose czxid is the token. It must not change
     *  what is created or how: only keep the reply. After a connection loss Curator may find its
     *  protected node instead of creating one; then no Stat comes back (czxid 0). */
    static class StatKeepingDriver extends StandardLockInternalsDriver {
        volatile Stat created = new Stat(); // of the last create: attemptLock creates again if its node vanished

        @Override
        public String createsTheLock(CuratorFramework client, String path, byte[] lockNodeBytes) throws Exception {
            Stat stat = new Stat();
            var create = client.create().storingStatIn(stat).creatingParentContainersIfNeeded().withProtection()
                    .withMode(CreateMode.EPHEMERAL_SEQUENTIAL);
            String node = lockNodeBytes != null ? create.forPath(path, lockNodeBytes) : create.forPath(path);
            created = stat;
            return node;
        }
    }

    /** One acquisition: its mutex, and the connection trouble count when it began. */
    record Lease(Mutex mutex, long troubleAtStart) {}

    CuratorFramework zk;
    int sessionMs = 3000;
    boolean recheckNodeAfterAcquire; // -o recheck_node_after_acquire (see the top); false is Curator as shipped
    final AtomicLong trouble = new AtomicLong(); // SUSPENDED or LOST seen, ever
    final Map<String, Lease> leases = new HashMap<>();

    public static void main(String[] args) throws Exception {
        CuratorClient c = new CuratorClient();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) continue;
            JsonNode req;
            try {
                req = JSON.readTree(line);
            } catch (Exception e) { // no id to answer to: say so on stderr, wait for the next line
                log("not a JSON request: " + line);
                continue;
            }
            ObjectNode rep;
            try {
                rep = c.handle(req);
            } catch (Exception e) { // it may have happened (a timeout, a lost connection)
                rep = reply("info").put("error", e.toString());
            }
            ObjectNode out = JSON.createObjectNode().set("id", req.get("id"));
            System.out.println(JSON.writeValueAsString(out.setAll(rep)));
            System.out.flush();
            if ("close".equals(req.path("op").asText())) break;
        }
        c.shutdown();
        System.exit(0); // Curator's threads are not daemons
    }

    ObjectNode handle(JsonNode req) throws Exception {
        String op = req.path("op").asText();
        switch (op) {
            case "init": return init(req);
            case "acquire": return acquire(req.path("key").asText(), req.path("timeout_s").asDouble());
            case "held": {
                Lease l = leases.get(req.path("value").asText());
                return reply("ok").put("held", l != null && trouble.get() == l.troubleAtStart());
            }
            case "release": {
                Lease l = leases.remove(req.path("value").asText());
                if (l == null) return reply("fail").put("error", "no lease " + req.path("value") + " held by this client");
                String node = l.mutex().node(); // null once released
                l.mutex().release(); // returns normally even if the session expired and the node is gone
                if (trouble.get() != l.troubleAtStart())
                    log("release of " + node + " returned normally, though the connection was suspended or lost while it was held");
                return reply("ok");
            }
            case "clock": return reply("ok").put("now_ms", System.currentTimeMillis());
            case "close": shutdown(); return reply("ok");
            default: return reply("unsupported"); // renew: the session keeps itself alive
        }
    }

    ObjectNode init(JsonNode req) throws Exception {
        try {
            recheckNodeAfterAcquire = flag(req.path("options"), "recheck_node_after_acquire");
        } catch (IllegalArgumentException e) { // refused before the run starts: the harness shows this line
            log(e.getMessage());
            System.exit(2);
        }
        log("recheck_node_after_acquire=" + recheckNodeAfterAcquire);
        List<String> hosts = new ArrayList<>();
        for (JsonNode s : req.path("servers")) hosts.add(s.path("host").asText() + ":" + s.path("port").asInt());
        JsonNode opt = req.path("options").path("session_timeout_ms"); // a number, or a string from -o
        if (!opt.isMissingNode() && !opt.isNull()) sessionMs = (int) opt.asDouble(sessionMs);
        // No SASL: its server principal needs a reverse DNS lookup of each server's address, which
        // blocks ~10 s per attempt where no name server answers (a chaos worker's netns).
        System.setProperty("zookeeper.sasl.client", "false");
        zk = CuratorFrameworkFactory.builder().connectString(String.join(",", hosts))
                .sessionTimeoutMs(sessionMs).connectionTimeoutMs(2000)
                .retryPolicy(new RetryNTimes(3, 100)).build();
        zk.getConnectionStateListenable().addListener((client, state) -> {
            if (state == ConnectionState.SUSPENDED || state == ConnectionState.LOST) trouble.incrementAndGet();
            log("connection " + state);
        });
        zk.start();
        // recheck_node_after_acquire is echoed so a test (and a reader of the history) can see it
        if (!zk.blockUntilConnected(10, TimeUnit.SECONDS))
            return reply("error").put("error", "not connected to " + hosts + " within 10 s")
                    .put("recheck_node_after_acquire", recheckNodeAfterAcquire);
        log("connected to " + hosts + ", session timeout " + sessionMs + " ms");
        return reply("ok").put("recheck_node_after_acquire", recheckNodeAfterAcquire);
    }

    /** A boolean client option as -o gives it (a string) or as JSON does; absent is false. */
    static boolean flag(JsonNode options, String name) {
        JsonNode v = options.path(name);
        if (v.isMissingNode() || v.isNull()) return false;
        if (v.isBoolean()) return v.booleanValue();
        if (v.isTextual()) {
            switch (v.asText().trim().toLowerCase(Locale.ROOT)) {
                case "1", "true", "yes", "on": return true;
                case "0", "false", "no", "off": return false;
                default: break;
            }
        }
        throw new IllegalArgumentException("-o " + name + "=" + v.asText() + ": " + name
                + " is a flag; give true or false (or yes/no, on/off, 1/0)");
    }

    ObjectNode acquire(String key, double timeoutS) throws Exception {
        Mutex m = new Mutex(zk, "/chaos/" + key);
        long before = trouble.get();
        if (!m.acquire((long) (timeoutS * 1000), TimeUnit.MILLISECONDS))
            return reply("fail").put("error", "not acquired within " + timeoutS + " s");
        if (recheckNodeAfterAcquire) {
            ObjectNode r = recheck(m);
            if (r != null) return r;
        }
        String value = UUID.randomUUID().toString();
        leases.put(value, new Lease(m, before));
        return reply("ok").put("value", value).put("token", token(m)).put("valid_ms", sessionMs);
    }

    /** The check of -o recheck_node_after_acquire, not the library's: read our lock node after
     *  acquire() returned; null if it is there, else the reply (released; in doubt, so info:
     *  Curator saw our node first before it returned, so we may have held the lock). */
    ObjectNode recheck(Mutex m) throws Exception {
        String node = m.node();
        if (zk.checkExists().forPath(node) != null) return null;
        log("recheck_node_after_acquire: " + node + " is gone right after the acquire");
        m.release();
        return reply("info").put("error", "the lock node " + node + " vanished right after the acquire");
    }

    /** The czxid of our lock node: from the create's reply; if Curator found its node after a
     *  connection loss instead (no Stat), read it, and if it is gone give no token (null), so
     *  that the token source never decides the answer. */
    Long token(Mutex m) {
        long czxid = m.driver.created.getCzxid();
        if (czxid != 0) return czxid;
        String node = m.node();
        try {
            Stat stat = zk.checkExists().forPath(node);
            if (stat != null) return stat.getCzxid();
            log("token: " + node + " is gone, no Stat from its create: no token");
        } catch (Exception e) {
            log("token: cannot read " + node + " (" + e + "): no token");
        }
        return null;
    }

    void shutdown() {
        if (zk == null) return;
        Thread t = new Thread(zk::close); // closing a partitioned session could wait; its nodes expire anyway
        t.setDaemon(true);
        t.start();
        try { t.join(1000); } catch (InterruptedException e) { /* exiting */ }
        zk = null;
    }

    static void log(String what) { System.err.println(java.time.Instant.now() + " " + what); }

    static ObjectNode reply(String type) { return JSON.createObjectNode().put("type", type); }
}
