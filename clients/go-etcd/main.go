// go-etcd: a chaoslock client (docs/client-protocol.md) around etcd's own lock,
// go.etcd.io/etcd/clientv3/concurrency.Mutex (etcd 3.4, Debian golang-etcd-server-dev),
// used as the articles do: NewSession(WithTTL), NewMutex, Lock, Unlock.
//
//	chaos client-check clients/go-etcd/bin/go-etcd --servers etcd:3
//	chaos run --client clients/go-etcd/bin/go-etcd --servers etcd:3 -n pause-holder --fencing
//
// One JSON request per line on stdin, one reply per line on stdout; logs on stderr.
//
// It tests the library as shipped: a thin shell over its public calls that adds no safety
// check of its own. When Lock returns nil the lock is taken, whatever etcd holds by then. A
// check the library does not make is a named option, off by default, read from init's
// options (-o NAME=VALUE) and declared in workloads/external.py (chaos list):
//
//	reread_after_lock  after Lock, Get our key; if it is gone, revoke and answer fail.
//	                   etcd 3.5's Lock makes this check after a wait (ErrSessionExpired);
//	                   3.4's does not, so a waiter whose session expired while it waited is
//	                   told it holds the lock. With this on, a run tests the check, not 3.4.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	"go.etcd.io/etcd/etcdserver/api/v3rpc/rpctypes"
	"go.uber.org/zap"
)

const dialTimeout = 2 * time.Second

type request struct {
	ID      int64  `json:"id"`
	Op      string `json:"op"`
	Servers []struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	} `json:"servers"`
	Key      string                 `json:"key"`
	Value    string                 `json:"value"`
	TTLms    int64                  `json:"ttl_ms"`
	TimeoutS float64                `json:"timeout_s"`
	Options  map[string]interface{} `json:"options"`
}

type reply map[string]interface{}

type lease struct {
	session *concurrency.Session
	mutex   *concurrency.Mutex
	ttl     int
	stop    context.CancelFunc // ends our listening to the session's keepalives
}

// epoch: the process's start; times below are time.Since(epoch), read on the monotonic clock
// (UnixNano strips it: a wall-clock step between a confirmation and the reply then moved the
// validity by the step, e.g. 7.7 s for a 2 s lease under a clock stepped back 6.6 s).
var epoch = time.Now()

func mono(t time.Time) int64 { return t.Sub(epoch).Nanoseconds() }

// listen notes when etcd last confirmed a session's lease: the send of its Grant, then each
// keepalive reply (the session sends them; we only add a listener, as clientv3 allows). The
// lease lives until a TTL after that, not after Lock returned: a waiter's Lock renews nothing.
func listen(id clientv3.LeaseID, granted time.Time) (*atomic.Int64, context.CancelFunc) {
	last := &atomic.Int64{}
	last.Store(mono(granted))
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := cli.KeepAlive(ctx, id)
	if err == nil {
		go func() {
			for r := range ch {
				if r != nil && r.TTL > 0 {
					last.Store(mono(time.Now()))
				}
			}
		}()
	}
	return last, cancel
}

var (
	endpoints []string
	cli       *clientv3.Client
	leases    = map[string]*lease{} // by value (the mutex key)
	// -o reread_after_lock (see the top of this file); false is the library as shipped.
	rereadAfterLock bool
)

func fail(err string) reply { return reply{"type": "fail", "error": err} }
func info(err error) reply  { return reply{"type": "info", "error": err.Error()} }

func connect() error {
	if cli != nil {
		return nil
	}
	lc := zap.NewProductionConfig()
	lc.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	lc.OutputPaths, lc.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: dialTimeout, LogConfig: &lc})
	if err != nil {
		return err
	}
	cli = c
	return nil
}

// revoke ends a session and deletes its key (the lease's keys go with it). nil means the
// key is certainly gone: revoked now, or the lease had already expired.
func revoke(s *concurrency.Session, d time.Duration) error {
	s.Orphan() // stop the keepalive
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := cli.Revoke(ctx, s.Lease())
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}

func acquire(req request) reply {
	if err := connect(); err != nil {
		return fail("not connected: " + err.Error()) // nothing was sent
	}
	ttl := int((req.TTLms + 999) / 1000)
	if ttl < 1 {
		ttl = 1
	}
	budget := time.Duration(req.TimeoutS * float64(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	// Grant here with the acquire's deadline (NewSession's own Grant has none), then the
	// articles' NewSession(WithTTL) on that lease. A lease without a key holds nothing.
	sent := time.Now()
	g, err := cli.Grant(ctx, int64(ttl))
	if err != nil {
		return fail("no session: " + err.Error())
	}
	confirmed, stop := listen(g.ID, sent)
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl), concurrency.WithLease(g.ID))
	if err != nil {
		stop()
		return fail("no session: " + err.Error())
	}
	mu := concurrency.NewMutex(s, "/chaos/"+req.Key)
	if err := mu.Lock(ctx); err != nil {
		// Lock's key may exist (and even own the lock) if its Txn reply was lost: revoke the
		// session; only if that certainly worked is the lock certainly not taken.
		stop()
		if rerr := revoke(s, 1500*time.Millisecond); rerr != nil {
			return reply{"type": "info", "error": fmt.Sprintf("lock: %v; revoke: %v", err, rerr)}
		}
		return fail("not acquired: " + err.Error())
	}
	if rereadAfterLock {
		if r := reread(s, mu); r != nil {
			stop()
			return r
		}
	}
	// The fencing token: the revision of the header Lock received on acquiring the lock
	// (Mutex.Header, the only one it exposes): its put's when it did not wait, else the one at
	// which no earlier key was left. Each later holder's is higher: it saw our key deleted.
	// Valid for a TTL from etcd's last confirmation of the session's lease (below zero if it
	// lapsed while we waited: what the library handed out is reported, not refused).
	leases[mu.Key()] = &lease{session: s, mutex: mu, ttl: ttl, stop: stop}
	validMs := int64(ttl)*1000 - (mono(time.Now())-confirmed.Load())/1e6
	return reply{"type": "ok", "value": mu.Key(), "token": mu.Header().Revision, "valid_ms": validMs}
}

// reread is the check of -o reread_after_lock, not the library's: Get our key after Lock
// returned; nil if it is there, else the reply (our session revoked, so fail if that
// certainly worked). etcd 3.5's Lock does the same after a wait; 3.4's does not.
func reread(s *concurrency.Session, mu *concurrency.Mutex) reply {
	gctx, gcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer gcancel()
	resp, err := cli.Get(gctx, mu.Key())
	if err == nil && len(resp.Kvs) > 0 {
		return nil
	}
	why := "key gone right after Lock"
	if err != nil {
		why = err.Error()
	}
	log.Printf("reread_after_lock: %s: %s", mu.Key(), why)
	if rerr := revoke(s, 1500*time.Millisecond); rerr != nil {
		return reply{"type": "info", "error": fmt.Sprintf("locked but reread failed (%s); revoke: %v", why, rerr)}
	}
	return fail("locked but reread failed (" + why + "); revoked")
}

func release(req request) reply {
	l, ok := leases[req.Value]
	if !ok {
		return fail("unknown value " + strconv.Quote(req.Value))
	}
	delete(leases, req.Value)
	l.stop()
	done := sessionDone(l.session)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := l.mutex.Unlock(ctx)
	// session.Close(), with a bounded revoke (Close waits up to the whole TTL).
	rerr := revoke(l.session, 1500*time.Millisecond)
	log.Printf("release %s: Unlock returned %v (session done before: %v); revoke: %v", req.Value, err, done, rerr)
	if err != nil {
		return info(err)
	}
	return reply{"type": "ok"} // even when the key was already gone: Unlock says nil, so do we
}

// flag is a boolean client option as -o gives it (a string) or as JSON does: absent is false.
func flag(opts map[string]interface{}, name string) (bool, error) {
	switch v := opts[name].(type) {
	case nil:
		return false, nil
	case bool:
		return v, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "1", "true", "yes", "on":
			return true, nil
		case "0", "false", "no", "off":
			return false, nil
		}
	}
	return false, fmt.Errorf("-o %s=%v: %s is a flag; give true or false (or yes/no, on/off, 1/0)", name, opts[name], name)
}

func sessionDone(s *concurrency.Session) bool {
	select {
	case <-s.Done():
		return true
	default:
		return false
	}
}

func closeAll() {
	for v, l := range leases {
		l.stop()
		revoke(l.session, 1*time.Second)
		delete(leases, v)
	}
	if cli != nil {
		cli.Close()
	}
}

func handle(req request) reply {
	switch req.Op {
	case "init":
		on, err := flag(req.Options, "reread_after_lock")
		if err != nil { // refused before the run starts: the harness shows this line
			log.Fatal(err)
		}
		rereadAfterLock = on
		log.Printf("reread_after_lock=%v", on)
		for _, s := range req.Servers {
			endpoints = append(endpoints, fmt.Sprintf("%s:%d", s.Host, s.Port))
		}
		// reread_after_lock is echoed so a test (and a reader of the history) can see it
		if err := connect(); err != nil { // retried at the next acquire
			return reply{"type": "error", "error": err.Error(), "reread_after_lock": on}
		}
		return reply{"type": "ok", "reread_after_lock": on}
	case "acquire":
		return acquire(req)
	case "release":
		return release(req)
	case "held":
		l, ok := leases[req.Value]
		return reply{"type": "ok", "held": ok && !sessionDone(l.session)}
	case "renew":
		return reply{"type": "unsupported"} // the session keeps the lease alive by itself
	case "clock":
		return reply{"type": "ok", "now_ms": time.Now().UnixMilli()} // the wall clock a clock skew moves
	}
	return reply{"type": "unsupported"}
}

func main() {
	log.SetOutput(os.Stderr)
	log.SetPrefix("go-etcd: ")
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := json.NewEncoder(os.Stdout) // one line per reply, written straight to the pipe
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			log.Printf("bad request %q: %v", in.Text(), err)
			continue
		}
		rep := reply{"type": "unsupported"}
		if req.Op == "close" {
			closeAll()
			rep = reply{"type": "ok"}
		} else {
			rep = handle(req)
		}
		rep["id"] = req.ID
		if err := out.Encode(rep); err != nil {
			log.Printf("stdout: %v", err)
			break
		}
		if req.Op == "close" {
			return
		}
	}
	closeAll()
}
