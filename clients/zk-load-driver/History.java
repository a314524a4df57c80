// The history of zk-load-driver (ZkLoadDriver.java): each client's ops in a list of its own, in
// time order; at the end one file of JSON lines merged into one time order (docs/history-format.md).
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;

final class Op {
    long t; int process; String type, f, key, value, err; long num, token, validUntil;
    boolean hasNum, hasToken; byte held; // held: 0 none, 1 true, 2 false

    Op tok(long token) { this.token = token; hasToken = true; return this; }
    Op num(long n) { num = n; hasNum = true; return this; }
}

final class Recorder {
    int process;
    final ArrayList<Op> ops = new ArrayList<>(4096);

    Op add(String type, String f, String key) {
        Op o = new Op();
        o.t = System.nanoTime();
        o.process = process; o.type = type; o.f = f; o.key = key;
        ops.add(o);
        return o;
    }
}

final class History {
    /** Every client's ops (each in time order) merged into one time order; a tie keeps the lower client first. */
    static long write(String path, Recorder[] recs) throws IOException {
        int[] next = new int[recs.length];
        long n = 0;
        try (BufferedWriter w = new BufferedWriter(new OutputStreamWriter(Files.newOutputStream(Path.of(path)),
                                                                         StandardCharsets.UTF_8), 1 << 20)) {
            StringBuilder b = new StringBuilder(256);
            while (true) {
                int best = -1;
                for (int i = 0; i < recs.length; i++) { // a linear scan: clients are few, ops many
                    if (next[i] < recs[i].ops.size()
                            && (best < 0 || recs[i].ops.get(next[i]).t < recs[best].ops.get(next[best]).t)) best = i;
                }
                if (best < 0) return n;
                Op o = recs[best].ops.get(next[best]++);
                b.setLength(0);
                b.append("{\"time_ns\":").append(o.t).append(",\"process\":").append(o.process)
                 .append(",\"type\":\"").append(o.type).append("\",\"f\":\"").append(o.f).append("\",\"key\":");
                quote(b, o.key);
                if (o.value != null) { b.append(",\"value\":"); quote(b, o.value); }
                else if (o.hasNum) b.append(",\"value\":").append(o.num);
                else if (o.held != 0) b.append(",\"value\":").append(o.held == 1);
                if (o.hasToken) b.append(",\"token\":").append(o.token);
                if (o.validUntil != 0) b.append(",\"valid_until_ns\":").append(o.validUntil);
                if (o.err != null) { b.append(",\"error\":"); quote(b, o.err); }
                b.append("}\n");
                w.append(b);
                n++;
            }
        }
    }

    static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        b.append('"');
    }
}
