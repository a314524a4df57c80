// etcd-yardstick: the etcd lock design's cycle driven by etcd's own Go client (clientv3),
// many goroutines at once, to measure what the servers can serve (chaoslock issue 30).
//
// One cycle, as workloads/etcd.py does it: Grant a lease of -ttl seconds; Txn
// If(CreateRevision(key) == 0) Then(Put(key, value, WithLease)); Txn If(Value(key) == value)
// Then(Delete(key)); Revoke the lease. Each goroutine works on a key of its own (as
// compare's throughput probe: N clients on N keys), so a cycle's put always succeeds; a put
// that does not (a key left by an earlier run) counts as not acquired and is not a cycle.
// The goroutines share -conns clients (gRPC connections), round robin.
//
// Prints one JSON line: {"cycles_per_s", "cycles", "not_acquired", "errors", "seconds", "clients"}.
// Exits 1 with one sentence on stderr when it cannot connect or every cycle failed.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.uber.org/zap"
)

func main() {
	endpoints := flag.String("endpoints", "", "comma-separated host:port of the etcd members")
	clients := flag.Int("clients", 32, "goroutines, each cycling on a key of its own")
	conns := flag.Int("conns", 4, "etcd clients (gRPC connections) the goroutines share")
	seconds := flag.Float64("seconds", 4, "how long to measure")
	ttl := flag.Int64("ttl", 2, "lease TTL, seconds")
	prefix := flag.String("prefix", "yardstick/", "key prefix")
	flag.Parse()
	if *endpoints == "" || *clients < 1 || *conns < 1 || *seconds <= 0 || *ttl < 1 {
		fmt.Fprintln(os.Stderr, "etcd-yardstick: -endpoints is required; -clients, -conns and -ttl at least 1, -seconds above 0")
		os.Exit(2)
	}
	lc := zap.NewProductionConfig()
	lc.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	lc.OutputPaths, lc.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	cs := make([]*clientv3.Client, *conns)
	for i := range cs {
		c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second, LogConfig: &lc})
		if err != nil {
			fmt.Fprintf(os.Stderr, "etcd-yardstick: cannot connect to %s: %v\n", *endpoints, err)
			os.Exit(1)
		}
		defer c.Close()
		cs[i] = c
	}
	var cycles, notAcquired, errs int64
	var lastErr atomic.Value
	start := time.Now()
	deadline := start.Add(time.Duration(*seconds * float64(time.Second)))
	var wg sync.WaitGroup
	for g := 0; g < *clients; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			c := cs[g%len(cs)]
			key := fmt.Sprintf("%s%d", *prefix, g)
			for n := 0; time.Now().Before(deadline); n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := cycle(ctx, c, key, fmt.Sprintf("g%d-%d", g, n), *ttl)
				cancel()
				switch {
				case err == errNotAcquired:
					atomic.AddInt64(&notAcquired, 1)
				case err != nil:
					atomic.AddInt64(&errs, 1)
					lastErr.Store(err.Error())
				default:
					atomic.AddInt64(&cycles, 1)
				}
			}
		}(g)
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	if cycles == 0 {
		fmt.Fprintf(os.Stderr, "etcd-yardstick: no cycle completed (%d errors, last: %v)\n", errs, lastErr.Load())
		os.Exit(1)
	}
	out, _ := json.Marshal(map[string]interface{}{"cycles_per_s": float64(cycles) / took, "cycles": cycles,
		"not_acquired": notAcquired, "errors": errs, "seconds": took, "clients": *clients})
	fmt.Println(string(out))
}

type notAcquiredError struct{}

func (notAcquiredError) Error() string { return "not acquired" }

var errNotAcquired error = notAcquiredError{}

func cycle(ctx context.Context, c *clientv3.Client, key, value string, ttl int64) error {
	lease, err := c.Grant(ctx, ttl)
	if err != nil {
		return err
	}
	put, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		return err
	}
	if !put.Succeeded {
		c.Revoke(ctx, lease.ID)
		return errNotAcquired
	}
	if _, err = c.Txn(ctx).If(clientv3.Compare(clientv3.Value(key), "=", value)).
		Then(clientv3.OpDelete(key)).Commit(); err != nil {
		return err
	}
	_, err = c.Revoke(ctx, lease.ID)
	return err
}
