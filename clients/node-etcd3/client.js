#!/usr/bin/env node
// npm's `etcd3` (microsoft/etcd3, pinned 1.1.2) on the chaoslock client protocol: its
// `client.lock(key)` Lock, a key put under a fresh lease if the key does not exist. A thin
// shell: every answer is the library's (README.md). Requests come one JSON object per line on
// stdin, replies go to stdout, logs to stderr (docs/client-protocol.md).
'use strict';
const readline = require('readline');
const { Etcd3, EtcdLockFailedError } = require('etcd3');

let client = null;
const locks = new Map(); // lease value -> { lock, lost }
let serial = 0;

function reply(id, rep) { process.stdout.write(JSON.stringify(Object.assign({ id }, rep)) + '\n'); }

async function handle(req) {
  switch (req.op) {
    case 'init': {
      if (req.lock && req.lock !== 'mutex') return { type: 'unsupported', error: `etcd3 has no ${req.lock} lock` };
      const opts = req.options || {};
      const deadline = Number(opts.call_timeout_ms || 2000);
      // The library's documented way to bound its calls (no deadline by default: a call to a
      // cut-off member would wait for ever); its retry and circuit-breaker policies stay default.
      client = new Etcd3({
        hosts: req.servers.map((s) => `http://${s.host}:${s.port}`),
        dialTimeout: deadline,
        defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + deadline }),
      });
      return { type: 'ok' };
    }
    case 'acquire': {
      // The lease TTL is in whole seconds: ttl_ms rounded up. Lock.acquire() tries once (no wait,
      // no retry on a taken lock): timeout_s has nothing to bound but its calls' deadline.
      const lock = client.lock(req.key).ttl(Math.ceil(req.ttl_ms / 1000));
      const entry = { lock, lost: false };
      try {
        await lock.acquire();
      } catch (e) {
        if (e instanceof EtcdLockFailedError) return { type: 'fail', error: e.message }; // the key existed
        return { type: 'info', error: String(e) }; // the put may have happened
      }
      // The Lease emits 'lost' when its keepalive learns it expired, or when no keepalive
      // succeeded for 2 TTLs; that is all the library believes about holding.
      lock.lease.on('lost', (e) => { entry.lost = true; process.stderr.write(`lease lost: ${e.message}\n`); });
      if (lock.lease.revoked()) entry.lost = true;
      const value = `${process.pid}-${++serial}`;
      locks.set(value, entry);
      // No token: the Lock hands out none (its lease id is no order). No valid_ms: it states none.
      return { type: 'ok', value, token: null };
    }
    case 'release': case 'held': {
      const entry = locks.get(req.value);
      if (!entry) return { type: 'fail', error: `no lease ${req.value} held by this client` };
      if (req.op === 'held') return { type: 'ok', held: !entry.lost };
      locks.delete(req.value);
      try {
        await entry.lock.release(); // revokes the lease, which deletes the key
        return { type: 'ok' };
      } catch (e) {
        return { type: 'info', error: String(e) };
      }
    }
    case 'clock':
      return { type: 'ok', now_ms: Date.now() };
    case 'close':
      if (client) client.close();
      return { type: 'ok', close: true };
    default: // renew: the lease keeps itself alive (every TTL/3); the Lock exposes no extend
      return { type: 'unsupported' };
  }
}

// One request at a time, in order: the harness waits for each reply before the next.
let queue = Promise.resolve();
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const req = JSON.parse(line);
  queue = queue.then(() => handle(req)).then((rep) => {
    reply(req.id, rep);
    if (rep.close) process.exit(0);
  }, (e) => reply(req.id, { type: 'info', error: String(e) }));
}).on('close', () => process.exit(0));
