#!/usr/bin/env node
// Node's `redlock` (npm, pinned 4.2.0) on the chaoslock client protocol: one ioredis
// client per master, majority within the TTL, the library's own retries. Requests come one
// JSON object per line on stdin, replies go to stdout, logs to stderr (docs/client-protocol.md).
'use strict';
const readline = require('readline');
const Redis = require('ioredis');
const Redlock = require('redlock');

let masters = [];
const locks = new Map(); // lease value -> redlock Lock

function reply(id, rep) { process.stdout.write(JSON.stringify(Object.assign({ id }, rep)) + '\n'); }
const isLockError = (e) => e instanceof Redlock.LockError;

async function handle(req) {
  switch (req.op) {
    case 'init':
      masters = req.servers.map((s) => new Redis({
        host: s.host, port: s.port, connectTimeout: 200, commandTimeout: 200, maxRetriesPerRequest: 0,
        enableOfflineQueue: false, retryStrategy: () => 100,
      }));
      masters.forEach((m) => m.on('error', () => {})); // a dead master is a "no" vote, not a crash
      await Promise.all(masters.map((m) => new Promise((ok) => m.once('ready', ok))));
      return { type: 'ok' };
    case 'acquire': {
      const redlock = new Redlock(masters, {
        driftFactor: 0.01, retryDelay: 50, retryJitter: 50,
        retryCount: Math.max(0, Math.floor((req.timeout_s * 1000) / 75)),
      });
      try {
        const lock = await redlock.lock(req.key, req.ttl_ms);
        locks.set(lock.value, lock);
        // Redlock has no fencing token; its validity is measured with the wall clock (Date.now()).
        return { type: 'ok', value: lock.value, token: null, valid_ms: lock.expiration - Date.now() };
      } catch (e) {
        return isLockError(e) ? { type: 'fail', error: e.message } : { type: 'info', error: String(e) };
      }
    }
    case 'release': case 'renew': case 'held': {
      const lock = locks.get(req.value);
      if (!lock) return { type: 'fail', error: `no lease ${req.value} held by this client` };
      if (req.op === 'held') return { type: 'ok', held: lock.expiration > Date.now() };
      try {
        if (req.op === 'renew') {
          const extended = await lock.extend(req.ttl_ms);
          locks.set(req.value, extended);
          return { type: 'ok', valid_ms: extended.expiration - Date.now() };
        }
        locks.delete(req.value);
        await lock.unlock();
        return { type: 'ok' };
      } catch (e) { // LockError: a majority did not confirm, the lease was not (or no longer) ours
        return isLockError(e) ? { type: 'fail', error: e.message } : { type: 'info', error: String(e) };
      }
    }
    case 'clock':
      return { type: 'ok', now_ms: Date.now() };
    case 'close':
      masters.forEach((m) => m.disconnect());
      return { type: 'ok', close: true };
    default:
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
