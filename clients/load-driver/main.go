// load-driver: chaoslock's native load mode (issue 30). N logical clients as goroutines run the
// worker's cycle (harness/engine/worker.py cycle: acquire, held, read, write, release) with the
// design's own calls, record every op with the host's CLOCK_MONOTONIC, and write the history for
// the harness to check. One Python process per client saturates 2 cores long before the lock
// service does; this driver does not, so a throughput figure measures the service.
//
// Designs (-design):
//
//	redis  the built-in `redis` design: EVAL of its acquire script (SET NX PX, then INCR of the
//	       fence, one script; the harness passes the script text), polled after a jittered pause
//	       of up to -retry-delay-ms while taken; release by its compare-and-delete script.
//	redlock  the built-in `redlock` design: SET NX PX on each master in turn, a majority and a
//	       positive validity (TTL less the acquire's time and the drift) hold it; release by the
//	       compare-and-delete script on every master. No token.
//	etcd   the built-in `etcd` design: lease grant (whole seconds, at least the TTL), txn
//	       put-if-absent with the lease (token: the put's revision), a wait for the key's deletion
//	       while taken, release by txn delete-if-value and a revoke. No background keepalive: a
//	       hold ends inside the validity counted from the grant (the cycle caps it), so it would
//	       renew nothing this cycle relies on.
//
// The protected counter is the harness's fenced counter on the store server (-store), through its
// own read and write scripts (-scripts DIR holds acquire.lua, release.lua, read.lua, write.lua).
//
// Protocol with the harness: once every client is connected it prints `ready` on stdout and starts;
// after -seconds (or on SIGTERM) each client finishes its cycle, and the driver writes the history (JSON lines, the
// fields of docs/history-format.md, in time order, no index) to -out and prints `done N` (ops;
// `done N capped` when it stopped early at -max-ops, which bounds its memory).
// A client whose op may have happened (a timeout, a broken connection) records `info` and goes on
// as a new process id (the old + -clients), as the Python workers do. It exits 1 with one sentence
// on stderr when it cannot connect.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"go.etcd.io/etcd/clientv3"
	"go.uber.org/zap"
)

// ---------------------------------------------------------------- the clock

var mono0 int64
var t0 time.Time

// Go's monotonic reading is CLOCK_MONOTONIC on Linux; one raw read anchors it to the host's.
func initClock() {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1 /* CLOCK_MONOTONIC */, uintptr(unsafe.Pointer(&ts)), 0)
	t0 = time.Now()
	mono0 = ts.Nano()
}

func nowNs() int64 { return mono0 + int64(time.Since(t0)) }

// ---------------------------------------------------------------- ops

type op struct {
	timeNs     int64
	process    int
	typ        string
	f          string
	key        string
	value      string // a lease value (quoted on output)
	num        int64  // a counter value
	hasNum     bool
	token      int64
	hasToken   bool
	validUntil int64
	err        string
	held       int8 // 0: no held value; 1 true; 2 false
}

type recorder struct {
	process int
	ops     []op
}

func (r *recorder) add(o op) {
	o.timeNs = nowNs()
	o.process = r.process
	r.ops = append(r.ops, o)
}

// writeOps writes every client's ops (each already in time order) merged into one time order;
// a tie keeps the lower client first, so the merge is stable.
func writeOps(path string, recs []*recorder) error {
	next := make([]int, len(recs))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	b := make([]byte, 0, 256)
	for {
		best := -1
		for i, r := range recs { // a linear scan: clients are few, ops many
			if next[i] < len(r.ops) && (best < 0 || r.ops[next[i]].timeNs < recs[best].ops[next[best]].timeNs) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		o := &recs[best].ops[next[best]]
		next[best]++
		b = b[:0]
		b = append(b, `{"time_ns":`...)
		b = strconv.AppendInt(b, o.timeNs, 10)
		b = append(b, `,"process":`...)
		b = strconv.AppendInt(b, int64(o.process), 10)
		b = append(b, `,"type":"`...)
		b = append(b, o.typ...)
		b = append(b, `","f":"`...)
		b = append(b, o.f...)
		b = append(b, `","key":`...)
		b = appendString(b, o.key)
		if o.value != "" {
			b = append(b, `,"value":`...)
			b = appendString(b, o.value)
		} else if o.hasNum {
			b = append(b, `,"value":`...)
			b = strconv.AppendInt(b, o.num, 10)
		} else if o.held != 0 {
			b = append(b, `,"value":`...)
			b = strconv.AppendBool(b, o.held == 1)
		}
		if o.hasToken {
			b = append(b, `,"token":`...)
			b = strconv.AppendInt(b, o.token, 10)
		}
		if o.validUntil != 0 {
			b = append(b, `,"valid_until_ns":`...)
			b = strconv.AppendInt(b, o.validUntil, 10)
		}
		if o.err != "" {
			b = append(b, `,"error":`...)
			b = appendString(b, o.err)
		}
		b = append(b, "}\n"...)
		if _, err := w.Write(b); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// ---------------------------------------------------------------- RESP

var errNil = errors.New("nil reply")

type resp struct {
	addr    string
	timeout time.Duration
	conn    net.Conn
	r       *bufio.Reader
	buf     []byte // the command being sent
}

func dialResp(addr string, timeout time.Duration) (*resp, error) {
	c := &resp{addr: addr, timeout: timeout}
	return c, c.redial()
}

func (c *resp) redial() error {
	if c.conn != nil {
		c.conn.Close()
	}
	conn, err := net.DialTimeout("tcp", c.addr, c.timeout)
	if err != nil {
		c.conn = nil
		return err
	}
	c.conn, c.r = conn, bufio.NewReader(conn)
	return nil
}

// do sends one command (one write) and reads its reply: an int64, a string, []interface{}, or
// errNil. The reply must come within the timeout (a read deadline; a write to a socket does not
// wait for the server).
func (c *resp) do(args ...string) (interface{}, error) {
	if c.conn == nil {
		if err := c.redial(); err != nil {
			return nil, err
		}
	}
	b := append(c.buf[:0], '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	c.buf = b
	c.conn.SetReadDeadline(time.Now().Add(c.timeout))
	if _, err := c.conn.Write(b); err != nil {
		c.conn.Close()
		c.conn = nil
		return nil, err
	}
	v, err := c.read()
	if err != nil && err != errNil && !isServerError(err) {
		c.conn.Close()
		c.conn = nil
	}
	return v, err
}

type serverError string

func (e serverError) Error() string { return string(e) }

func isServerError(err error) bool { _, ok := err.(serverError); return ok }

func (c *resp) read() (interface{}, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, fmt.Errorf("bad reply %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, serverError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return nil, errNil
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return nil, errNil
		}
		out := make([]interface{}, n)
		for i := range out {
			v, err := c.read()
			if err != nil && err != errNil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("bad reply %q", line)
}

func ioReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// script: EVALSHA of a script loaded once per connection's server, EVAL if the server lost it.
type script struct {
	text, sha string
}

func (s *script) run(c *resp, keys []string, args ...string) (interface{}, error) {
	a := append([]string{"EVALSHA", s.sha, strconv.Itoa(len(keys))}, keys...)
	v, err := c.do(append(a, args...)...)
	if err != nil && isServerError(err) && strings.HasPrefix(err.Error(), "NOSCRIPT") {
		a[0], a[1] = "EVAL", s.text
		return c.do(append(a, args...)...)
	}
	return v, err
}

func loadScript(c *resp, text string) (*script, error) {
	v, err := c.do("SCRIPT", "LOAD", text)
	if err != nil {
		return nil, err
	}
	return &script{text: text, sha: v.(string)}, nil
}

// ---------------------------------------------------------------- the counter

var errStale = errors.New("stale-token")

type counter struct {
	conn        *resp
	read, write *script
	fencing     bool
}

func (c *counter) call(s *script, key string, token int64, has bool, args ...string) (int64, error) {
	t := ""
	if c.fencing && has {
		t = strconv.FormatInt(token, 10)
	}
	v, err := s.run(c.conn, []string{key + ":value", key + ":max-token"}, append([]string{t}, args...)...)
	if err != nil {
		return 0, err
	}
	arr, ok := v.([]interface{})
	if !ok || len(arr) != 2 {
		return 0, fmt.Errorf("counter script answered %v", v)
	}
	if arr[0] != int64(1) {
		return 0, errStale
	}
	n, _ := arr[1].(int64)
	return n, nil
}

// ---------------------------------------------------------------- the designs

type lease struct {
	value      string
	token      int64
	validUntil int64
	leaseID    clientv3.LeaseID
	noToken    bool // the design has no fencing token (Redlock)
}

var errNotAcquired = errors.New("not acquired")

type design interface {
	acquire(key string, deadline time.Time) (lease, error) // errNotAcquired: certainly not taken
	release(key string, l lease) (bool, error)
	reset() // after an error in doubt: a fresh connection
}

type config struct {
	ttlMs        int64
	drift        float64
	retryDelay   time.Duration
	nodeTimeout  time.Duration
	acquireTotal time.Duration
	holdMax      time.Duration
	resource     bool    // the critical section reads and writes the counter
	safetyMargin float64 // of the TTL, kept free at the end of a hold (worker.SAFETY_MARGIN)
}

var cfg config

func validFrom(startNs int64, ms int64) int64 {
	return startNs + int64(float64(ms)*(1-cfg.drift)*1e6)
}

type redisDesign struct {
	conn               *resp
	acquireS, releaseS *script
	rng                *rand.Rand
	n                  int64
	name               string
}

func (d *redisDesign) acquire(key string, deadline time.Time) (lease, error) {
	for {
		d.n++
		value := d.name + "-" + strconv.FormatInt(d.n, 10)
		start := nowNs()
		v, err := d.acquireS.run(d.conn, []string{key, key + ":fence"}, value, strconv.FormatInt(cfg.ttlMs, 10))
		if err == nil {
			token, _ := v.(int64)
			return lease{value: value, token: token, validUntil: validFrom(start, cfg.ttlMs)}, nil
		}
		if err != errNil {
			return lease{}, err
		}
		pause := time.Duration(d.rng.Float64() * float64(cfg.retryDelay))
		if time.Now().Add(pause).After(deadline) {
			return lease{}, errNotAcquired
		}
		time.Sleep(pause)
	}
}

func (d *redisDesign) release(key string, l lease) (bool, error) {
	v, err := d.releaseS.run(d.conn, []string{key}, l.value)
	if err != nil {
		return false, err
	}
	return v == int64(1), nil
}

func (d *redisDesign) reset() { d.conn.redial() }

// redlockDesign as workloads/redlock.py RedlockClient: SET NX PX on every master in turn (a master
// that does not answer counts as a no), held with a majority and validity = ttl - elapsed - drift
// (ttl * drift + 2 ms) still positive, counted from the end of the acquire; else release
// everywhere and poll again after a jittered pause. Release: compare-and-delete on every master,
// ok with a majority. No token.
type redlockDesign struct {
	conns    []*resp
	releaseS []*script
	rng      *rand.Rand
	n        int64
	name     string
}

func (d *redlockDesign) acquire(key string, deadline time.Time) (lease, error) {
	quorum := len(d.conns)/2 + 1
	for {
		d.n++
		value := d.name + "-" + strconv.FormatInt(d.n, 10)
		start := nowNs()
		got := 0
		for _, c := range d.conns {
			if v, err := c.do("SET", key, value, "NX", "PX", strconv.FormatInt(cfg.ttlMs, 10)); err == nil && v == "OK" {
				got++
			}
		}
		now := nowNs()
		validity := float64(cfg.ttlMs) - float64(now-start)/1e6 - (float64(cfg.ttlMs)*cfg.drift + 2)
		if got >= quorum && validity > 0 {
			return lease{value: value, validUntil: now + int64(validity*1e6), noToken: true}, nil
		}
		d.releaseAll(key, value)
		if time.Now().Add(cfg.retryDelay).After(deadline) {
			return lease{}, errNotAcquired
		}
		time.Sleep(time.Duration(d.rng.Float64() * float64(cfg.retryDelay)))
	}
}

func (d *redlockDesign) releaseAll(key, value string) int {
	released := 0
	for i, c := range d.conns {
		if v, err := d.releaseS[i].run(c, []string{key}, value); err == nil && v == int64(1) {
			released++
		}
	}
	return released
}

func (d *redlockDesign) release(key string, l lease) (bool, error) {
	return d.releaseAll(key, l.value) >= len(d.conns)/2+1, nil
}

func (d *redlockDesign) reset() {}

type etcdDesign struct {
	c    *clientv3.Client
	n    int64
	name string
}

func leaseSeconds(ttlMs int64) int64 {
	s := int64(math.Ceil(float64(ttlMs) / 1000))
	if s < 1 {
		return 1
	}
	return s
}

func (d *etcdDesign) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), cfg.nodeTimeout)
}

func (d *etcdDesign) revoke(id clientv3.LeaseID) {
	ctx, cancel := d.ctx()
	d.c.Revoke(ctx, id)
	cancel()
}

// As workloads/etcd.py EtcdClient.acquire: one lease for every try, refreshed while waiting.
func (d *etcdDesign) acquire(key string, deadline time.Time) (lease, error) {
	d.n++
	value := d.name + "-" + strconv.FormatInt(d.n, 10)
	grantedAt := nowNs()
	ctx, cancel := d.ctx()
	g, err := d.c.Grant(ctx, leaseSeconds(cfg.ttlMs))
	cancel()
	if err != nil { // no txn was sent: the lock cannot have been taken
		return lease{}, errNotAcquired
	}
	for tries := 0; ; tries++ {
		if tries > 0 && nowNs()-grantedAt > g.TTL*1e9/3 {
			t := nowNs()
			ctx, cancel := d.ctx()
			k, err := d.c.KeepAliveOnce(ctx, g.ID)
			cancel()
			if err != nil || k.TTL <= 0 {
				d.revoke(g.ID)
				return lease{}, errNotAcquired
			}
			grantedAt = t
		}
		ctx, cancel := d.ctx()
		r, err := d.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, value, clientv3.WithLease(g.ID))).Else(clientv3.OpGet(key)).Commit()
		cancel()
		if err != nil {
			d.revoke(g.ID) // deletes the key if the ambiguous txn did write it
			return lease{}, err
		}
		if r.Succeeded {
			ms := cfg.ttlMs
			if g.TTL*1000 < ms {
				ms = g.TTL * 1000
			}
			return lease{value: value, token: r.Responses[0].GetResponsePut().Header.Revision,
				validUntil: validFrom(grantedAt, ms), leaseID: g.ID}, nil
		}
		if !time.Now().Before(deadline) {
			d.revoke(g.ID)
			return lease{}, errNotAcquired
		}
		kvs := r.Responses[0].GetResponseRange().Kvs
		if len(kvs) > 0 { // wait for its deletion, at most until the deadline or a third of the lease
			wait := time.Until(deadline)
			if third := time.Duration(g.TTL) * time.Second / 3; third < wait {
				wait = third
			}
			wctx, wcancel := context.WithTimeout(context.Background(), wait)
			for w := range d.c.Watch(wctx, key, clientv3.WithRev(kvs[0].ModRevision+1)) {
				if w.Err() != nil || len(w.Events) > 0 {
					break
				}
			}
			wcancel()
		}
	}
}

func (d *etcdDesign) release(key string, l lease) (bool, error) {
	ctx, cancel := d.ctx()
	r, err := d.c.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", l.value)).Then(clientv3.OpDelete(key)).Commit()
	cancel()
	d.revoke(l.leaseID)
	if err != nil {
		return false, err
	}
	return r.Succeeded, nil
}

func (d *etcdDesign) reset() {}

// ---------------------------------------------------------------- the worker's cycle

// cycle as harness/engine/worker.py's: false when the process id must change.
func cycle(d design, cnt *counter, rec *recorder, rng *rand.Rand, key string, end time.Time) bool {
	rec.add(op{typ: "invoke", f: "acquire", key: key})
	deadline := time.Now().Add(cfg.acquireTotal)
	if tail := time.Until(end); tail < cfg.acquireTotal {
		if tail < 250*time.Millisecond { // worker.TAIL_TIMEOUT_S
			tail = 250 * time.Millisecond
		}
		deadline = time.Now().Add(tail)
	}
	l, err := d.acquire(key, deadline)
	if err == errNotAcquired {
		rec.add(op{typ: "fail", f: "acquire", key: key, err: "not acquired"})
		return true
	}
	if err != nil {
		rec.add(op{typ: "info", f: "acquire", key: key, err: errText(err)})
		d.reset()
		return false
	}
	rec.add(op{typ: "ok", f: "acquire", key: key, value: l.value, token: l.token, hasToken: !l.noToken, validUntil: l.validUntil})
	has := !l.noToken // a design without a token presents none to the counter
	rec.add(op{typ: "invoke", f: "held", key: key})
	held := int8(1)
	if nowNs() >= l.validUntil {
		held = 2
	}
	rec.add(op{typ: "ok", f: "held", key: key, held: held})
	if held == 2 || !cfg.resource {
		return release(d, rec, key, l)
	}
	resource := key + ":counter"
	rec.add(op{typ: "invoke", f: "read", key: resource, token: l.token, hasToken: has})
	v, err := cnt.call(cnt.read, key, l.token, has)
	switch {
	case err == errStale:
		rec.add(op{typ: "fail", f: "read", key: resource, token: l.token, hasToken: has, err: "stale-token"})
		return release(d, rec, key, l)
	case err != nil:
		rec.add(op{typ: "info", f: "read", key: resource, token: l.token, hasToken: has, err: errText(err)})
		cnt.conn.redial()
		release(d, rec, key, l)
		return false
	}
	rec.add(op{typ: "ok", f: "read", key: resource, num: v, hasNum: true, token: l.token, hasToken: has})
	hold(rng, l, end)
	next := v + 1
	rec.add(op{typ: "invoke", f: "write", key: resource, num: next, hasNum: true, token: l.token, hasToken: has})
	_, err = cnt.call(cnt.write, key, l.token, has, strconv.FormatInt(next, 10))
	switch {
	case err == errStale:
		rec.add(op{typ: "fail", f: "write", key: resource, num: next, hasNum: true, token: l.token, hasToken: has, err: "stale-token"})
	case err != nil:
		rec.add(op{typ: "info", f: "write", key: resource, num: next, hasNum: true, token: l.token, hasToken: has, err: errText(err)})
		cnt.conn.redial()
		release(d, rec, key, l)
		return false
	default:
		rec.add(op{typ: "ok", f: "write", key: resource, num: next, hasNum: true, token: l.token, hasToken: has})
	}
	return release(d, rec, key, l)
}

// hold: a random critical section below -hold-max-ms, the validity left less the safety margin,
// and the run's end (worker.py's cycle).
func hold(rng *rand.Rand, l lease, end time.Time) {
	if cfg.holdMax <= 0 {
		return
	}
	most := time.Duration(l.validUntil-nowNs()) - time.Duration(cfg.safetyMargin*float64(cfg.ttlMs)*1e6)
	if most > cfg.holdMax {
		most = cfg.holdMax
	}
	if most <= 0 {
		return
	}
	h := time.Duration(rng.Float64() * float64(most))
	if left := time.Until(end); h > left {
		h = left
	}
	if h > 0 {
		time.Sleep(h)
	}
}

func release(d design, rec *recorder, key string, l lease) bool {
	rec.add(op{typ: "invoke", f: "release", key: key, value: l.value})
	ok, err := d.release(key, l)
	switch {
	case err != nil:
		rec.add(op{typ: "info", f: "release", key: key, value: l.value, err: errText(err)})
		d.reset()
		return false
	case ok:
		rec.add(op{typ: "ok", f: "release", key: key, value: l.value})
	default:
		rec.add(op{typ: "fail", f: "release", key: key, value: l.value, err: "not held"})
	}
	return true
}

func errText(err error) string {
	s := err.Error()
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// ---------------------------------------------------------------- main

func die(code int, format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "load-driver: "+format+"\n", a...)
	os.Exit(code)
}

func main() {
	designName := flag.String("design", "", "redis, redlock or etcd")
	lockAddrs := flag.String("lock", "", "comma-separated host:port of the lock servers")
	storeAddr := flag.String("store", "", "host:port of the store server (the fenced counter)")
	keysArg := flag.String("keys", "", "comma-separated lock keys")
	clients := flag.Int("clients", 1, "logical clients (goroutines)")
	ownKey := flag.Bool("own-key", false, "client i always takes key i mod len(keys); else a seeded random key per cycle")
	seconds := flag.Float64("seconds", 3, "how long to run")
	seed := flag.Int64("seed", 1, "seed of the key choices and pauses")
	ttl := flag.Int64("ttl-ms", 1000, "lease TTL, ms")
	drift := flag.Float64("drift", 0.01, "drift factor taken off the validity")
	retry := flag.Float64("retry-delay-ms", 50, "upper bound of the jittered pause between polls (redis)")
	nodeTimeout := flag.Float64("node-timeout-ms", 100, "timeout of one request, ms")
	acquireTimeout := flag.Float64("acquire-timeout-s", 2, "how long an acquire tries")
	holdMax := flag.Float64("hold-max-ms", 0, "longest critical section, ms (a random one below it)")
	safety := flag.Float64("safety-margin", 0.1, "share of the TTL a hold leaves free before the validity ends")
	noResource := flag.Bool("no-resource", false, "no counter in the critical section: the lock cycle alone")
	fencing := flag.Bool("fencing", false, "present the token to the counter")
	scripts := flag.String("scripts", "", "directory of acquire.lua, release.lua, read.lua, write.lua")
	conns := flag.Int("conns", 4, "etcd clients (gRPC connections) the goroutines share")
	out := flag.String("out", "", "where the history goes")
	maxOps := flag.Int64("max-ops", 20_000_000, "stop the run once this many ops are recorded (memory)")
	profile := flag.String("cpuprofile", "", "write a Go CPU profile here (to see where the driver's time goes)")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			die(2, "cannot write the profile: %v", err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	keys := strings.Split(*keysArg, ",")
	if *designName != "redis" && *designName != "redlock" && *designName != "etcd" || *lockAddrs == "" || *storeAddr == "" || *keysArg == "" ||
		*clients < 1 || *seconds <= 0 || *out == "" || *scripts == "" || *conns < 1 {
		die(2, "-design redis|redlock|etcd, -lock, -store, -keys, -scripts and -out are required; -clients and -conns at least 1, -seconds above 0")
	}
	cfg = config{ttlMs: *ttl, drift: *drift, retryDelay: time.Duration(*retry * 1e6),
		nodeTimeout: time.Duration(*nodeTimeout * 1e6), acquireTotal: time.Duration(*acquireTimeout * 1e9),
		holdMax: time.Duration(*holdMax * 1e6), safetyMargin: *safety, resource: !*noResource}
	initClock()
	text := map[string]string{}
	for _, name := range []string{"acquire", "release", "read", "write"} {
		b, err := os.ReadFile(filepath.Join(*scripts, name+".lua"))
		if err != nil {
			die(2, "cannot read %s.lua in %s: %v", name, *scripts, err)
		}
		text[name] = string(b)
	}
	var etcds []*clientv3.Client
	if *designName == "etcd" {
		lc := zap.NewProductionConfig()
		lc.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
		lc.OutputPaths, lc.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
		for i := 0; i < *conns; i++ {
			c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*lockAddrs, ","), DialTimeout: 5 * time.Second, LogConfig: &lc})
			if err != nil {
				die(1, "cannot connect to etcd at %s: %v", *lockAddrs, err)
			}
			defer c.Close()
			etcds = append(etcds, c)
		}
	}
	designs := make([]design, *clients)
	counters := make([]*counter, *clients)
	for i := range designs {
		sc, err := dialResp(*storeAddr, cfg.nodeTimeout*10)
		if err != nil {
			die(1, "cannot connect to the store at %s: %v", *storeAddr, err)
		}
		sc.timeout = cfg.nodeTimeout * 10 // the counter's timeout: workloads/resource.py's 1 s
		rd, err1 := loadScript(sc, text["read"])
		wr, err2 := loadScript(sc, text["write"])
		if err1 != nil || err2 != nil {
			die(1, "cannot load the counter's scripts into the store at %s: %v %v", *storeAddr, err1, err2)
		}
		counters[i] = &counter{conn: sc, read: rd, write: wr, fencing: *fencing}
		name := fmt.Sprintf("ld%d-c%d", os.Getpid(), i)
		switch *designName {
		case "redis":
			lc, err := dialResp(strings.Split(*lockAddrs, ",")[0], cfg.nodeTimeout)
			if err != nil {
				die(1, "cannot connect to the lock server at %s: %v", *lockAddrs, err)
			}
			lc.timeout = cfg.nodeTimeout
			a, err1 := loadScript(lc, text["acquire"])
			r, err2 := loadScript(lc, text["release"])
			if err1 != nil || err2 != nil {
				die(1, "cannot load the lock scripts at %s: %v %v", *lockAddrs, err1, err2)
			}
			designs[i] = &redisDesign{conn: lc, acquireS: a, releaseS: r, rng: rand.New(rand.NewSource(*seed*7919 + int64(i))), name: name}
		case "redlock":
			d := &redlockDesign{rng: rand.New(rand.NewSource(*seed*7919 + int64(i))), name: name}
			for _, addr := range strings.Split(*lockAddrs, ",") {
				c, err := dialResp(addr, cfg.nodeTimeout)
				if err != nil {
					die(1, "cannot connect to the master at %s: %v", addr, err)
				}
				r, err := loadScript(c, text["release"])
				if err != nil {
					die(1, "cannot load the release script at %s: %v", addr, err)
				}
				d.conns, d.releaseS = append(d.conns, c), append(d.releaseS, r)
			}
			designs[i] = d
		case "etcd":
			designs[i] = &etcdDesign{c: etcds[i%len(etcds)], name: name}
		}
	}
	var recorded int64 // ops of every client so far, against -max-ops
	var capped int32   // the run stopped at -max-ops
	var stopped int32  // SIGTERM: the harness stops the run early (a Ctrl-C); each client ends its cycle
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() { <-term; atomic.StoreInt32(&stopped, 1) }()
	fmt.Println("ready")
	end := time.Now().Add(time.Duration(*seconds * 1e9))
	recs := make([]*recorder, *clients)
	var wg sync.WaitGroup
	for i := range designs {
		recs[i] = &recorder{process: i, ops: make([]op, 0, 4096)}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(*seed*7919 + int64(i)))
			for time.Now().Before(end) && atomic.LoadInt32(&stopped) == 0 {
				if atomic.LoadInt64(&recorded) >= *maxOps {
					atomic.StoreInt32(&capped, 1)
					break
				}
				key := keys[i%len(keys)]
				if !*ownKey && len(keys) > 1 {
					key = keys[rng.Intn(len(keys))]
				}
				before := len(recs[i].ops)
				if !cycle(designs[i], counters[i], recs[i], rng, key, end) {
					recs[i].process += *clients
				}
				atomic.AddInt64(&recorded, int64(len(recs[i].ops)-before))
			}
		}(i)
	}
	wg.Wait()
	total := 0
	for _, r := range recs {
		total += len(r.ops)
	}
	if err := writeOps(*out, recs); err != nil {
		die(1, "cannot write the history to %s: %v", *out, err)
	}
	if atomic.LoadInt32(&capped) == 1 {
		fmt.Printf("done %d capped\n", total)
	} else {
		fmt.Printf("done %d\n", total)
	}
}
