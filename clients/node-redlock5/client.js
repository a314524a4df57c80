#!/usr/bin/env node
// npm's `redlock` 5.0.0-beta.2 (pinned, on ioredis 5.11.1) on the chaoslock client protocol: one
// ioredis client per master, the library's quorum, retries and drift. A thin shell: every
// answer is the library's (README.md). Requests come one JSON object per line on stdin, replies
// go to stdout, logs to stderr (docs/client-protocol.md).
'use strict';
const readline = require('readline');
const Redis = require('ioredis');
const { default: Redlock, ExecutionError, ResourceLockedError } = require('redlock');

const RETRY_DELAY_MS = 200; // the library's defaults: retryDelay 200, retryJitter 100, driftFactor 0.01
let redlock = null;
let masters = [];
const locks = new Map(); // lease value -> the library's Lock (extend replaces it)

function reply(id, rep) { process.stdout.write(JSON.stringify(Object.assign({ id }, rep)) + '\n'); }

// An ExecutionError says a quorum was not reached. It is a certain "no" only when a quorum of the
// masters answered and said no (ResourceLockedError: taken by another, or not ours to release);
// a vote lost to a timeout or a dead connection may have been a write that happened.
async function certainNo(e) {
  if (!(e instanceof ExecutionError) || !e.attempts.length) return false;
  const stats = await e.attempts[e.attempts.length - 1]; // resolves once every master answered
  const against = [...stats.votesAgainst.values()];
  return against.length >= stats.quorumSize && against.every((x) => x instanceof ResourceLockedError);
}

async function handle(req) {
  switch (req.op) {
    case 'init': {
      if (req.lock && req.lock !== 'mutex') return { type: 'unsupported', error: `redlock has no ${req.lock} lock` };
      const opts = req.options || {};
      const timeout = Number(opts.command_timeout_ms || 2000);
      masters = req.servers.map((s) => new Redis({
        host: s.host, port: s.port, connectTimeout: timeout, commandTimeout: timeout,
        maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => 100,
      }));
      masters.forEach((m) => m.on('error', () => {})); // a dead master is a "no" vote, not a crash
      await Promise.all(masters.map((m) => new Promise((ok) => m.once('ready', ok))));
      redlock = new Redlock(masters);
      return { type: 'ok' };
    }
    case 'acquire': {
      // The library retries retryCount times, RETRY_DELAY_MS +- 100 apart: that many fit in timeout_s.
      const retryCount = Math.max(0, Math.floor((req.timeout_s * 1000) / RETRY_DELAY_MS) - 1);
      try {
        const lock = await redlock.acquire([req.key], req.ttl_ms, { retryCount });
        locks.set(lock.value, lock);
        // No token (Redlock has none). The validity is the library's own: Lock.expiration, its
        // Date.now() when acquire() began + ttl - drift.
        return { type: 'ok', value: lock.value, token: null, valid_ms: lock.expiration - Date.now() };
      } catch (e) {
        return (await certainNo(e)) ? { type: 'fail', error: e.message } : { type: 'info', error: String(e) };
      }
    }
    case 'release': case 'renew': {
      const lock = locks.get(req.value);
      if (!lock) return { type: 'fail', error: `no lease ${req.value} held by this client` };
      try {
        if (req.op === 'renew') {
          const extended = await lock.extend(req.ttl_ms); // a new Lock; the old one's expiration is 0
          locks.set(req.value, extended);
          return { type: 'ok', valid_ms: extended.expiration - Date.now() };
        }
        locks.delete(req.value);
        await lock.release();
        return { type: 'ok' };
      } catch (e) { // extend refuses an expired Lock itself ("Cannot extend an already-expired lock.")
        return (await certainNo(e)) || (e instanceof ExecutionError && !e.attempts.length)
          ? { type: 'fail', error: e.message } : { type: 'info', error: String(e) };
      }
    }
    case 'clock':
      return { type: 'ok', now_ms: Date.now() };
    case 'close':
      masters.forEach((m) => m.disconnect());
      return { type: 'ok', close: true };
    default: // held: the Lock keeps no belief of its own beyond its expiration (no watchdog, no listener)
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
