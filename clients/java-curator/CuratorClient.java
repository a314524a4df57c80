// A lock client over the chaoslock client protocol: Apache Curator's InterProcessMutex on ZooKeeper.
//
//   scripts/clients/java-curator.sh      (builds it, writes clients/java-curator/bin/java-curator)
//   chaos run --client clients/java-curator/bin/java-curator --servers zookeeper:3 -n pause-holder
//
// One JSON request per line on stdin, one reply per line on stdout, logs on stderr. JSON is read
// and written with Jackson (jackson-databind, which Debian's Curator packages depend on already).

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.data.Stat;

public class CuratorClient {
    static final ObjectMapper JSON = new ObjectMapper();

    /** InterProcessMutex with its lock node's path in view (getLockPath is protected). */
    static class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) { super(client, path); }
        String node() { return getLockPath(); }
    }

    /** One acquisition: its mutex, and the connection trouble count when it began. */
    record Lease(Mutex mutex, long troubleAtStart) {}

    CuratorFramework zk;
    int sessionMs = 3000;
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
        if (!zk.blockUntilConnected(10, TimeUnit.SECONDS))
            return reply("error").put("error", "not connected to " + hosts + " within 10 s");
        log("connected to " + hosts + ", session timeout " + sessionMs + " ms");
        return reply("ok");
    }

    ObjectNode acquire(String key, double timeoutS) throws Exception {
        Mutex m = new Mutex(zk, "/chaos/" + key);
        long before = trouble.get();
        if (!m.acquire((long) (timeoutS * 1000), TimeUnit.MILLISECONDS))
            return reply("fail").put("error", "not acquired within " + timeoutS + " s");
        Stat stat = zk.checkExists().forPath(m.node());
        if (stat == null) { // acquired, yet its node is gone already: in doubt
            m.release();
            return reply("info").put("error", "the lock node " + m.node() + " vanished right after the acquire");
        }
        String value = UUID.randomUUID().toString();
        leases.put(value, new Lease(m, before));
        return reply("ok").put("value", value).put("token", stat.getCzxid()).put("valid_ms", sessionMs);
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
