// The store's fenced counter for zk-load-driver (ZkLoadDriver.java): a tiny RESP client and the
// harness's read.lua and write.lua (workloads/resource.py), as clients/load-driver's counter.
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

final class ServerError extends Exception {
    ServerError(String m) { super(m); }
}

final class Stale extends Exception {}

/** One connection to the store; a timeout or a broken connection drops it (the next call redials). */
final class Resp {
    final String host; final int port, timeoutMs;
    Socket sock; InputStream in; OutputStream out;
    final ByteArrayOutputStream cmd = new ByteArrayOutputStream(256);

    Resp(String addr, int timeoutMs) {
        int c = addr.lastIndexOf(':');
        host = addr.substring(0, c); port = Integer.parseInt(addr.substring(c + 1)); this.timeoutMs = timeoutMs;
    }

    void close() {
        try { if (sock != null) sock.close(); } catch (IOException e) { /* gone anyway */ }
        sock = null;
    }

    Object call(String... args) throws IOException, ServerError {
        if (sock == null) {
            sock = new Socket();
            sock.setTcpNoDelay(true);
            sock.connect(new InetSocketAddress(host, port), timeoutMs);
            sock.setSoTimeout(timeoutMs);
            in = new BufferedInputStream(sock.getInputStream(), 8192); out = sock.getOutputStream();
        }
        cmd.reset();
        cmd.writeBytes(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
        for (String a : args) {
            byte[] v = a.getBytes(StandardCharsets.UTF_8);
            cmd.writeBytes(("$" + v.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
            cmd.writeBytes(v);
            cmd.writeBytes(new byte[] {'\r', '\n'});
        }
        try {
            cmd.writeTo(out);
            return read();
        } catch (IOException e) {
            close();
            throw e;
        }
    }

    String line() throws IOException {
        StringBuilder s = new StringBuilder();
        int c;
        while ((c = in.read()) != '\r') {
            if (c < 0) throw new IOException("the store closed the connection");
            s.append((char) c);
        }
        in.read();
        return s.toString();
    }

    Object read() throws IOException, ServerError {
        String l = line();
        String body = l.substring(1);
        switch (l.charAt(0)) {
            case '+': return body;
            case '-': throw new ServerError(body);
            case ':': return Long.parseLong(body);
            case '$': {
                int n = Integer.parseInt(body);
                if (n < 0) return null;
                byte[] v = in.readNBytes(n + 2);
                if (v.length < n + 2) throw new IOException("the store closed the connection");
                return new String(v, 0, n, StandardCharsets.UTF_8);
            }
            case '*': {
                int n = Integer.parseInt(body);
                if (n < 0) return null;
                List<Object> out = new ArrayList<>(n);
                for (int i = 0; i < n; i++) out.add(read());
                return out;
            }
            default: throw new IOException("bad reply " + l);
        }
    }
}

/** The harness's fenced counter (workloads/resource.py) through read.lua and write.lua. */
final class Counter {
    final Resp conn; final String readText, writeText; final boolean fencing; String readSha, writeSha;

    Counter(Resp conn, String readText, String writeText, boolean fencing) throws IOException, ServerError {
        this.conn = conn; this.fencing = fencing; this.readText = readText; this.writeText = writeText;
        readSha = (String) conn.call("SCRIPT", "LOAD", readText);
        writeSha = (String) conn.call("SCRIPT", "LOAD", writeText);
    }

    long call(boolean write, String key, long token, String... more) throws IOException, ServerError, Stale {
        String[] a = new String[6 + more.length];
        a[0] = "EVALSHA"; a[1] = write ? writeSha : readSha; a[2] = "2";
        a[3] = key + ":value"; a[4] = key + ":max-token"; a[5] = fencing ? Long.toString(token) : "";
        System.arraycopy(more, 0, a, 6, more.length);
        Object v;
        try {
            v = conn.call(a);
        } catch (ServerError e) {
            if (!e.getMessage().startsWith("NOSCRIPT")) throw e;
            a[0] = "EVAL"; a[1] = write ? writeText : readText;
            v = conn.call(a);
        }
        if (!(v instanceof List) || ((List<?>) v).size() != 2) throw new IOException("counter script answered " + v);
        List<?> r = (List<?>) v;
        if (!Long.valueOf(1).equals(r.get(0))) throw new Stale();
        return r.get(1) instanceof Long ? (Long) r.get(1) : 0;
    }
}
