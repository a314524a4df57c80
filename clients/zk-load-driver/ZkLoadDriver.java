// zk-load-driver: chaoslock's native load mode (issue 30) for the built-in `zookeeper` design, on
// ZooKeeper's own Java client. The twin of clients/load-driver (Go, the redis and etcd designs):
// the same flags where they apply, the same protocol with harness/engine/native.py, the same ops
// per cycle (acquire, held, read, write, release), recorded with the host's CLOCK_MONOTONIC
// (System.nanoTime on Linux). N logical clients are threads sharing -sessions ZooKeeper sessions
// round robin.
//
// The design's cycle (workloads/zookeeper.py ZooKeeperClient): create an EPHEMERAL_SEQUENTIAL
// /chaoslock/<key>/lock-<value>- with its stat (CREATE2: the token is its czxid); getChildren; the
// lowest sequence holds the lock, valid until the getChildren's send time plus the session
// timeout; any other contender watches its immediate predecessor with exists and waits, at most
// until the acquire deadline, then deletes its node and fails. Release deletes the node (NoNode:
// fail "not held"). `held` asks no server: true while the session has not been disconnected
// since the create and the validity has not passed. A node an ambiguous op may have left is
// deleted before the next acquire, as the design does. Every call is bounded by
// -node-timeout-ms (an asynchronous call waited for that long): a late answer is `info`.
//
// Protocol: once every session is connected it prints `ready` on stdout and starts; after
// -seconds (or on SIGTERM) each client finishes its cycle, the driver writes the history (JSON lines, the fields
// of docs/history-format.md, in time order, no index) to -out and prints `done N` (ops; `done N
// capped` when it stopped early at -max-ops, which bounds its memory: about 100 bytes an op). A client
// that records `info` goes on as a new process id (the old + -clients). It exits 1 with one
// sentence on stderr when it cannot connect, 2 on bad flags.
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.client.ZKClientConfig;
import org.apache.zookeeper.data.Stat;

public class ZkLoadDriver {
    static final String ROOT = "/chaoslock";
    static final Pattern SEQ = Pattern.compile("^lock-[0-9a-f]{32}-\\d{10}$"); // the design's _SEQ
    static final long TAIL_NS = 250_000_000L; // worker.TAIL_TIMEOUT_S
    static final byte[] EMPTY = new byte[0];

    // ------------------------------------------------------------ flags (Go's flag syntax)

    static final Map<String, String> flags = new HashMap<>();
    static final Set<String> BOOLS = Set.of("own-key", "fencing", "no-resource");
    static final Set<String> KNOWN = Set.of("design", "lock", "store", "keys", "clients", "own-key", "seconds", "seed",
            "ttl-ms", "drift", "retry-delay-ms", "node-timeout-ms", "acquire-timeout-s", "hold-max-ms", "safety-margin",
            "no-resource", "fencing", "scripts", "out", "max-ops", "sessions", "session-timeout-ms");

    static void parse(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("-")) die(2, "unexpected argument " + a);
            String name = a.replaceFirst("^--?", ""), v = null;
            int eq = name.indexOf('=');
            if (eq >= 0) { v = name.substring(eq + 1); name = name.substring(0, eq); }
            if (!KNOWN.contains(name)) die(2, "unknown flag -" + name + " (drift and retry-delay-ms are accepted and unused)");
            if (v == null) {
                if (BOOLS.contains(name)) v = "true";
                else if (i + 1 < args.length) v = args[++i];
                else die(2, "flag -" + name + " needs a value");
            }
            flags.put(name, v);
        }
    }

    static String str(String name, String dflt) { return flags.getOrDefault(name, dflt); }
    static boolean bool(String name) { return Boolean.parseBoolean(flags.getOrDefault(name, "false")); }
    static double num(String name, double dflt) {
        try {
            return flags.containsKey(name) ? Double.parseDouble(flags.get(name)) : dflt;
        } catch (NumberFormatException e) {
            die(2, "-" + name + " takes a number, not " + flags.get(name));
            return 0;
        }
    }

    static void die(int code, String msg) {
        System.err.println("zk-load-driver: " + msg);
        System.err.flush();
        ended(code);
    }

    // The end of the process, whoever asks for it. SIGTERM (the harness stops the run early, a
    // Ctrl-C) runs the shutdown hook, which stops the clients and waits here until main has written
    // the history; halt then gives main's status, not SIGTERM's.
    static final CountDownLatch ENDED = new CountDownLatch(1);
    static volatile int status;

    static void ended(int code) {
        status = code;
        ENDED.countDown();
        System.exit(code); // blocks for ever if a shutdown is under way; the hook halts with `status`
    }

    static void stopOnSigterm() {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopped = true;
            try {
                ENDED.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            Runtime.getRuntime().halt(status);
        }, "sigterm"));
    }

    // ------------------------------------------------------------ config

    static long ttlMs, nodeTimeoutMs, acquireNs, holdMaxNs;
    static double safetyMargin;
    static boolean resource, fencing;
    static int sessionMs;
    static volatile boolean stopped, capped; // capped: the run stopped at -max-ops
    static final AtomicLong recorded = new AtomicLong(); // ops of every client so far, against -max-ops

    static String text(Exception e) {
        String s = e instanceof KeeperException ? e.getMessage() : e.toString();
        if (s == null) s = e.getClass().getSimpleName();
        return s.length() > 300 ? s.substring(0, 300) : s;
    }

    // ------------------------------------------------------------ the design

    /** One ZooKeeper session. `losses` counts disconnections: a lease taken under an older count is lost. */
    static final class Session implements Watcher {
        final String connect;
        volatile ZooKeeper zk;
        volatile boolean connected;
        volatile int losses;
        final Set<CountDownLatch> waiters = ConcurrentHashMap.newKeySet();

        Session(String connect) throws IOException {
            this.connect = connect;
            open();
        }

        void open() throws IOException {
            ZKClientConfig conf = new ZKClientConfig();
            // No SASL: its server principal needs a reverse DNS lookup (zk-yardstick says why).
            conf.setProperty(ZKClientConfig.ENABLE_CLIENT_SASL_KEY, "false");
            zk = new ZooKeeper(connect, sessionMs, this, conf);
        }

        @Override
        public synchronized void process(WatchedEvent e) {
            if (e.getType() != Event.EventType.None) return;
            switch (e.getState()) {
                case SyncConnected:
                    connected = true;
                    notifyAll();
                    return;
                case Expired: // kazoo starts a new session; so do we
                    lost();
                    try {
                        open();
                    } catch (IOException x) {
                        System.err.println("zk-load-driver: cannot open a new session: " + x);
                    }
                    return;
                default: // Disconnected, Closed, AuthFailed: SUSPENDED or LOST to kazoo's listener
                    lost();
            }
        }

        void lost() {
            connected = false;
            losses++;
            for (CountDownLatch w : waiters) w.countDown(); // a waiter re-checks rather than sleep through it
        }

        synchronized boolean waitConnected(long deadline) throws InterruptedException {
            long left;
            while (!connected && (left = deadline - System.nanoTime()) > 0) {
                TimeUnit.NANOSECONDS.timedWait(this, left);
            }
            return connected;
        }
    }

    static final class NotAcquired extends Exception {
        NotAcquired(String m) { super(m); }
    }

    static final class Lease {
        String value, path; long token, validUntil; int losses;
    }

    /** A client's side of the design: its session and the nodes an ambiguous op may have left. */
    static final class Zk {
        final Session s; final String name; long n;
        final List<String[]> orphans = new ArrayList<>(); // {parent, "lock-<value>-"}

        Zk(Session s, String name) { this.s = s; this.name = name; }

        void cleanup() {
            for (int i = orphans.size() - 1; i >= 0; i--) {
                String[] o = orphans.get(i);
                try {
                    for (String c : children(s.zk, o[0])) {
                        if (c.startsWith(o[1])) {
                            try { delete(s.zk, o[0] + "/" + c); } catch (KeeperException.NoNodeException e) { /* gone */ }
                        }
                    }
                    orphans.remove(i);
                } catch (Exception e) {
                    // the next acquire tries again; the session's end removes it anyway
                }
            }
        }

        Lease acquire(String key, long deadline) throws Exception {
            if (!s.waitConnected(deadline)) throw new NotAcquired("no live ZooKeeper session");
            if (!orphans.isEmpty()) cleanup();
            String value = name + String.format("%016x", ++n);
            String parent = ROOT + "/" + key, prefix = "lock-" + value + "-";
            ZooKeeper zk = s.zk;
            int losses = s.losses;
            Created node;
            try {
                try {
                    node = create(zk, parent + "/" + prefix, CreateMode.EPHEMERAL_SEQUENTIAL);
                } catch (KeeperException.NoNodeException e) { // makepath: the parent went
                    ensure(zk, ROOT);
                    ensure(zk, parent);
                    node = create(zk, parent + "/" + prefix, CreateMode.EPHEMERAL_SEQUENTIAL);
                }
            } catch (KeeperException.SessionExpiredException e) {
                throw new NotAcquired("the session expired: an ephemeral node of it cannot exist");
            } catch (Exception e) {
                orphans.add(new String[] {parent, prefix});
                throw e;
            }
            String path = node.path();
            String me = path.substring(path.lastIndexOf('/') + 1);
            long mine = seq(me);
            try {
                while (true) {
                    long asked = System.nanoTime();
                    List<String> children = children(zk, parent);
                    if (!children.contains(me)) throw new NotAcquired("our lock node vanished while queued (session expired)");
                    if (s.losses != losses) throw new IOException("session suspended while acquiring");
                    String pred = null;
                    long predSeq = -1;
                    int ahead = 0;
                    for (String c : children) {
                        if (!SEQ.matcher(c).matches()) continue;
                        long q = seq(c);
                        if (q < mine) {
                            ahead++;
                            if (q > predSeq) { predSeq = q; pred = c; }
                        }
                    }
                    if (pred == null) {
                        Lease l = new Lease();
                        l.value = value; l.path = path; l.token = node.czxid(); l.losses = losses;
                        l.validUntil = asked + Math.min(sessionMs, zk.getSessionTimeout()) * 1_000_000L;
                        return l;
                    }
                    CountDownLatch woke = new CountDownLatch(1);
                    s.waiters.add(woke);
                    try {
                        if (exists(zk, parent + "/" + pred, e -> woke.countDown()) == null) continue; // gone: look again
                        long left = deadline - System.nanoTime();
                        if (left <= 0 || !woke.await(left, TimeUnit.NANOSECONDS)) {
                            giveUp(zk, path);
                            throw new NotAcquired(ahead + " contender(s) ahead of us after the acquire timeout");
                        }
                    } finally {
                        s.waiters.remove(woke);
                    }
                }
            } catch (NotAcquired e) {
                throw e;
            } catch (KeeperException.SessionExpiredException e) {
                throw new NotAcquired("the session expired while we queued: our node went with it");
            } catch (Exception e) {
                orphans.add(new String[] {parent, prefix});
                cleanup();
                throw e;
            }
        }

        /** Delete our node after a timeout. If that fails the node may yet hold: not a fail. */
        void giveUp(ZooKeeper zk, String path) throws Exception {
            try {
                delete(zk, path);
            } catch (KeeperException.NoNodeException e) {
                // gone already
            }
        }

        boolean held(Lease l) {
            return s.connected && s.losses == l.losses && System.nanoTime() < l.validUntil;
        }

        boolean release(Lease l) throws Exception {
            try {
                delete(s.zk, l.path);
                return true;
            } catch (KeeperException.NoNodeException e) {
                return false; // the session expired and took the node with it
            } catch (Exception e) {
                orphans.add(new String[] {l.path.substring(0, l.path.lastIndexOf('/')), "lock-" + l.value + "-"});
                throw e;
            }
        }
    }

    // Every call is asynchronous and waited for at most -node-timeout-ms, as the design's
    // _Session.call: a late answer is an ambiguous op, and the session goes on (the client's own
    // zookeeper.request.timeout would drop the connection, and every lease of the session with it).

    record Created(String path, long czxid) {}

    static <T> T await(CompletableFuture<T> f) throws Exception {
        try {
            return f.get(nodeTimeoutMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new TimeoutException("ZooKeeper did not answer within " + nodeTimeoutMs + " ms");
        } catch (ExecutionException e) {
            throw (Exception) e.getCause();
        }
    }

    static <T> boolean settle(CompletableFuture<T> f, int rc, String path, T v) {
        return rc == 0 ? f.complete(v) : f.completeExceptionally(KeeperException.create(KeeperException.Code.get(rc), path));
    }

    static Created create(ZooKeeper zk, String path, CreateMode mode) throws Exception {
        CompletableFuture<Created> f = new CompletableFuture<>();
        zk.create(path, EMPTY, ZooDefs.Ids.OPEN_ACL_UNSAFE, mode, (rc, p, ctx, name, stat) ->
                settle(f, rc, p, rc == 0 ? new Created(name, stat.getCzxid()) : null), null);
        return await(f);
    }

    static List<String> children(ZooKeeper zk, String path) throws Exception {
        CompletableFuture<List<String>> f = new CompletableFuture<>();
        zk.getChildren(path, false, (rc, p, ctx, cs) -> settle(f, rc, p, cs), null);
        return await(f);
    }

    static void delete(ZooKeeper zk, String path) throws Exception {
        CompletableFuture<Boolean> f = new CompletableFuture<>();
        zk.delete(path, -1, (rc, p, ctx) -> settle(f, rc, p, true), null);
        await(f);
    }

    /** The node's stat, null if it does not exist; the watch is set either way. */
    static Stat exists(ZooKeeper zk, String path, Watcher w) throws Exception {
        CompletableFuture<Stat> f = new CompletableFuture<>();
        zk.exists(path, w, (rc, p, ctx, stat) -> {
            if (rc == KeeperException.Code.NONODE.intValue()) f.complete(null);
            else settle(f, rc, p, stat);
        }, null);
        return await(f);
    }

    static long seq(String name) {
        try {
            return Long.parseLong(name.substring(name.lastIndexOf('-') + 1));
        } catch (NumberFormatException e) {
            return Long.MAX_VALUE;
        }
    }

    static void ensure(ZooKeeper zk, String path) throws Exception {
        try {
            create(zk, path, CreateMode.PERSISTENT);
        } catch (KeeperException.NodeExistsException e) {
            // there already
        }
    }

    // ------------------------------------------------------------ the worker's cycle

    /** As harness/engine/worker.py's cycle: false when the process id must change. */
    static boolean cycle(Zk d, Counter cnt, Recorder rec, Random rng, String key, long end) throws InterruptedException {
        rec.add("invoke", "acquire", key);
        long now = System.nanoTime(), deadline = now + acquireNs;
        if (end - now < acquireNs) deadline = now + Math.max(end - now, TAIL_NS);
        Lease l;
        try {
            l = d.acquire(key, deadline);
        } catch (NotAcquired e) {
            rec.add("fail", "acquire", key).err = e.getMessage();
            return true;
        } catch (InterruptedException e) {
            throw e;
        } catch (Exception e) {
            rec.add("info", "acquire", key).err = text(e);
            return false;
        }
        Op ok = rec.add("ok", "acquire", key).tok(l.token);
        ok.value = l.value; ok.validUntil = l.validUntil;
        rec.add("invoke", "held", key);
        boolean held = d.held(l);
        rec.add("ok", "held", key).held = (byte) (held ? 1 : 2);
        if (!held || !resource) return release(d, rec, key, l);
        String res = key + ":counter";
        rec.add("invoke", "read", res).tok(l.token);
        long v;
        try {
            v = cnt.call(false, key, l.token);
        } catch (Stale e) {
            rec.add("fail", "read", res).tok(l.token).err = "stale-token";
            return release(d, rec, key, l);
        } catch (Exception e) {
            rec.add("info", "read", res).tok(l.token).err = text(e);
            cnt.conn.close();
            release(d, rec, key, l);
            return false;
        }
        rec.add("ok", "read", res).tok(l.token).num(v);
        hold(rng, l, end);
        long next = v + 1;
        rec.add("invoke", "write", res).tok(l.token).num(next);
        try {
            cnt.call(true, key, l.token, Long.toString(next));
            rec.add("ok", "write", res).tok(l.token).num(next);
        } catch (Stale e) {
            rec.add("fail", "write", res).tok(l.token).num(next).err = "stale-token";
        } catch (Exception e) {
            rec.add("info", "write", res).tok(l.token).num(next).err = text(e);
            cnt.conn.close();
            release(d, rec, key, l);
            return false;
        }
        return release(d, rec, key, l);
    }

    /** A random critical section below -hold-max-ms, the validity left less the safety margin, and the run's end. */
    static void hold(Random rng, Lease l, long end) throws InterruptedException {
        if (holdMaxNs <= 0) return;
        long most = Math.min(holdMaxNs, l.validUntil - System.nanoTime() - (long) (safetyMargin * ttlMs * 1e6));
        if (most <= 0) return;
        long h = Math.min((long) (rng.nextDouble() * most), end - System.nanoTime());
        if (h > 0) TimeUnit.NANOSECONDS.sleep(h);
    }

    static boolean release(Zk d, Recorder rec, String key, Lease l) {
        rec.add("invoke", "release", key).value = l.value;
        try {
            if (d.release(l)) {
                rec.add("ok", "release", key).value = l.value;
            } else {
                Op o = rec.add("fail", "release", key);
                o.value = l.value; o.err = "not held";
            }
            return true;
        } catch (Exception e) {
            Op o = rec.add("info", "release", key);
            o.value = l.value; o.err = text(e);
            return false;
        }
    }

    // ------------------------------------------------------------ main

    public static void main(String[] args) throws Exception {
        parse(args);
        String lock = str("lock", ""), store = str("store", ""), keysArg = str("keys", ""), out = str("out", "");
        String scripts = str("scripts", "");
        int clients = (int) num("clients", 1), sessions = (int) num("sessions", 4);
        double seconds = num("seconds", 3);
        if (!"zookeeper".equals(str("design", "")) || lock.isEmpty() || store.isEmpty() || keysArg.isEmpty()
                || clients < 1 || sessions < 1 || seconds <= 0 || out.isEmpty() || scripts.isEmpty()) {
            die(2, "-design zookeeper, -lock, -store, -keys, -scripts and -out are required; -clients and -sessions "
                   + "at least 1, -seconds above 0");
        }
        String[] keys = keysArg.split(",");
        boolean ownKey = bool("own-key");
        long seed = (long) num("seed", 1), maxOps = (long) num("max-ops", 20_000_000);
        ttlMs = (long) num("ttl-ms", 1000);
        nodeTimeoutMs = Math.max(1, (long) num("node-timeout-ms", 2000));
        acquireNs = (long) (num("acquire-timeout-s", 2) * 1e9);
        holdMaxNs = (long) (num("hold-max-ms", 0) * 1e6);
        safetyMargin = num("safety-margin", 0.1);
        sessionMs = (int) num("session-timeout-ms", 3000);
        resource = !bool("no-resource");
        fencing = bool("fencing");
        String readText = null, writeText = null;
        try {
            readText = Files.readString(Path.of(scripts, "read.lua"));
            writeText = Files.readString(Path.of(scripts, "write.lua"));
        } catch (IOException e) {
            die(2, "cannot read read.lua and write.lua in " + scripts + ": " + e);
        }

        Session[] ss = new Session[sessions];
        long connectBy = System.nanoTime() + 15_000_000_000L; // the design's connect_timeout_s
        for (int i = 0; i < sessions; i++) ss[i] = new Session(lock);
        for (Session s : ss) {
            if (!s.waitConnected(connectBy)) die(1, "cannot connect to ZooKeeper at " + lock + " within 15 s");
        }
        for (int k = -1; k < keys.length; k++) { // within the connect timeout, as the design's open()
            String path = k < 0 ? ROOT : ROOT + "/" + keys[k];
            while (true) {
                try {
                    ensure(ss[0].zk, path);
                    break;
                } catch (Exception e) {
                    if (!ss[0].waitConnected(connectBy) || System.nanoTime() > connectBy) {
                        die(1, "cannot create " + path + " at " + lock + ": " + text(e));
                    }
                }
            }
        }
        Zk[] ds = new Zk[clients];
        Counter[] counters = new Counter[clients];
        String pid = String.format("%08x", ProcessHandle.current().pid());
        for (int i = 0; i < clients; i++) {
            try { // the counter's timeout: workloads/resource.py's 1 s at the Go driver's usual 100 ms
                counters[i] = new Counter(new Resp(store, (int) Math.min(Integer.MAX_VALUE, nodeTimeoutMs * 10)), readText, writeText, fencing);
            } catch (Exception e) {
                die(1, "cannot load the counter's scripts into the store at " + store + ": " + e);
            }
            ds[i] = new Zk(ss[i % sessions], pid + String.format("%08x", i)); // with the cycle number: 32 hex digits
        }

        stopOnSigterm(); // each client ends its cycle and the history is still written
        System.out.println("ready");
        System.out.flush();
        long end = System.nanoTime() + (long) (seconds * 1e9);
        Recorder[] recs = new Recorder[clients];
        Thread[] ts = new Thread[clients];
        for (int i = 0; i < clients; i++) {
            final int c = i;
            recs[i] = new Recorder();
            recs[i].process = i;
            ts[i] = new Thread(() -> {
                Random rng = new Random(seed * 7919 + c);
                try {
                    while (System.nanoTime() < end && !stopped) {
                        if (recorded.get() >= maxOps) {
                            capped = true;
                            break;
                        }
                        int before = recs[c].ops.size();
                        String key = keys[c % keys.length];
                        if (!ownKey && keys.length > 1) key = keys[rng.nextInt(keys.length)];
                        if (!cycle(ds[c], counters[c], recs[c], rng, key, end)) recs[c].process += clients;
                        recorded.addAndGet(recs[c].ops.size() - before);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "client-" + i);
            ts[i].start();
        }
        for (Thread t : ts) t.join();
        for (Session s : ss) s.zk.close(); // our ephemeral nodes go at once
        long total;
        try {
            total = History.write(out, recs);
        } catch (IOException e) {
            die(1, "cannot write the history to " + out + ": " + e);
            return;
        }
        System.out.println("done " + total + (capped ? " capped" : ""));
        System.out.flush();
        ended(0);
    }
}
