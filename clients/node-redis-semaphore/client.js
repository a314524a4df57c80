#!/usr/bin/env node
// npm's `redis-semaphore` (pinned 5.8.0, on ioredis 5.11.1) on the chaoslock client protocol: its
// `Mutex`, or with `--lock semaphore:N` its `Semaphore`, on one Redis. A thin shell: every answer
// is the library's (README.md). Requests come one JSON object per line on stdin, replies go to
// stdout, logs to stderr (docs/client-protocol.md).
'use strict';
const readline = require('readline');
const Redis = require('ioredis');
const { Mutex, Semaphore } = require('redis-semaphore');

let redis = null;
let permits = null; // null: the Mutex; N: a Semaphore of N permits
const locks = new Map(); // lease value (the library's identifier) -> Mutex or Semaphore
const lost = new Set(); // identifiers whose onLockLost the library called

function reply(id, rep) { process.stdout.write(JSON.stringify(Object.assign({ id }, rep)) + '\n'); }

async function handle(req) {
  switch (req.op) {
    case 'init': {
      const kind = String(req.lock || 'mutex');
      if (kind.startsWith('semaphore:')) permits = Number(kind.slice('semaphore:'.length));
      else if (kind !== 'mutex') return { type: 'unsupported', error: `redis-semaphore has no ${kind} lock` };
      const opts = req.options || {};
      const s = req.servers[0];
      // ioredis has no command timeout by default (a cut link would hang a call for ever); the
      // library leaves the connection to the user, so this is the one setting we choose.
      redis = new Redis({ host: s.host, port: s.port, lazyConnect: true,
        commandTimeout: Number(opts.command_timeout_ms || 2000) });
      redis.on('error', (e) => process.stderr.write(`ioredis: ${e.message}\n`));
      await redis.connect();
      return { type: 'ok' };
    }
    case 'acquire': {
      const options = {
        lockTimeout: req.ttl_ms, // ms: the key's PX (Mutex) or the entry's age limit (Semaphore)
        acquireTimeout: Math.round(req.timeout_s * 1000), // the library's own deadline, Date.now() based
        onLockLost: (e) => { // called by the library's refresh timer when a refresh finds the lock gone
          process.stderr.write(`onLockLost: ${e.message}\n`);
          lost.add(lock.identifier);
        },
      };
      const lock = permits === null ? new Mutex(redis, req.key, options)
        : new Semaphore(redis, req.key, req.permits || permits, options);
      try {
        if (!(await lock.tryAcquire())) return { type: 'fail', error: 'tryAcquire: false (acquireTimeout passed)' };
      } catch (e) { // a command failed or timed out: the SET or ZADD may have happened
        return { type: 'info', error: String(e) };
      }
      locks.set(lock.identifier, lock);
      // No token (the library hands out none) and no valid_ms (it states no validity: it
      // refreshes the key itself every 0.8 lockTimeout until release or onLockLost).
      return { type: 'ok', value: lock.identifier, token: null };
    }
    case 'release': case 'held': {
      const lock = locks.get(req.value);
      if (!lock) return { type: 'fail', error: `no lease ${req.value} held by this client` };
      if (req.op === 'held') return { type: 'ok', held: lock.isAcquired }; // false once onLockLost ran
      locks.delete(req.value);
      try {
        await lock.release(); // a compare-and-delete (ZREM); it does not say whether it deleted
        return { type: 'ok' };
      } catch (e) {
        return { type: 'info', error: String(e) };
      }
    }
    case 'clock':
      return { type: 'ok', now_ms: Date.now() };
    case 'close':
      if (redis) redis.disconnect();
      return { type: 'ok', close: true };
    default: // renew: the library refreshes by itself and exposes no extend
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
