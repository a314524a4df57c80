"""The table of bad inputs that tests/unit/architecture/test_bad_input_table.py runs through the real CLI.

Each row is `Row(id, argv, code=254, words=...)`: the command line (without `chaos`), the
exit code it must end with (254 = one sentence on stderr; 0/1/2 = a documented verdict, with
stderr empty) and a few words stderr must hold, so the sentence names the offender. To add a
case, add a row; a new malformed run or history is a new FIXTURES entry.

Placeholders in argv, filled in per row by the test:
  {store}      a fresh, empty store dir (the row must leave it empty); with `earlier=NAME` it
               holds an earlier run of test NAME and `latest` naming it, which must not move
  {tmp}        a fresh scratch dir;  {file} a plain file in it;  {busy_port} a port held open
  {run:NAME}   a run dir holding FIXTURES[NAME];  {hist:NAME} its history.jsonl

A fixture maps file names to contents (str or bytes), or to FIFO / DIR for a named pipe or
a directory in place of the file.

`chaos run` rows get `--time-limit 1 --concurrency 1 --backend redis --store {store}` for
whichever of those they do not set themselves (run()). On top of that the test runs every
row that could start a run with server binaries that cannot be found, so a row whose
validation is missing fails on that, and never starts a cluster.

guard="hostile-id" rows are first tried in-process with every reaper function that touches
the system replaced by a trap; a row that would reach one is failed, never run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

FIFO, DIR = object(), object()


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    id: str
    argv: tuple[str, ...]
    code: int = 254
    words: str = ""
    guard: str | None = None
    earlier: str | None = None  # a test name: {store} then holds an earlier run of it, which `latest` names


def row(id: str, *argv: str, code: int = 254, words: str = "", guard: str | None = None,
        earlier: str | None = None) -> Row:
    return Row(id=id, argv=tuple(argv), code=code, words=words, guard=guard, earlier=earlier)


_RUN_DEFAULTS = (("--time-limit", "-t", "1"), ("--concurrency", "-c", "1"), ("--backend", "-b", "redis"),
                 ("--store", None, "{store}"))


def run(id: str, *flags: str, words: str = "", code: int = 254, earlier: str | None = None) -> Row:
    """A `chaos run` row with the safe defaults added for flags it does not give itself."""
    extra: list[str] = []
    for long, short, value in _RUN_DEFAULTS:
        if long not in flags and (short is None or short not in flags):
            extra += [long, value]
    return row(f"run-{id}", "run", *flags, *extra, code=code, words=words, earlier=earlier)


# ---------------------------------------------------------------- histories and runs

def jsonl(*ops: dict) -> str:
    return "".join(json.dumps(o) + "\n" for o in ops)


INV = {"index": 0, "time_ns": 1000, "process": 0, "type": "invoke", "f": "acquire", "key": "lock"}
OK = {"index": 1, "time_ns": 2000, "process": 0, "type": "ok", "f": "acquire", "key": "lock", "token": 1,
      "valid_until_ns": 2_000_002_000}  # its lease: the TTL of 2 s
REST = [{"index": 2, "time_ns": 3000, "process": 0, "type": "invoke", "f": "read", "key": "lock:counter", "token": 1},
        {"index": 3, "time_ns": 4000, "process": 0, "type": "ok", "f": "read", "key": "lock:counter", "value": 0, "token": 1},
        {"index": 4, "time_ns": 5000, "process": 0, "type": "invoke", "f": "write", "key": "lock:counter", "value": 1, "token": 1},
        {"index": 5, "time_ns": 6000, "process": 0, "type": "ok", "f": "write", "key": "lock:counter", "value": 1, "token": 1},
        {"index": 6, "time_ns": 7000, "process": 0, "type": "invoke", "f": "release", "key": "lock"},
        {"index": 7, "time_ns": 8000, "process": 0, "type": "ok", "f": "release", "key": "lock"},
        {"index": 8, "time_ns": 8500, "process": "final", "type": "invoke", "f": "read", "key": "lock:counter"},
        {"index": 9, "time_ns": 8600, "process": "final", "type": "ok", "f": "read", "key": "lock:counter", "value": 1}]
GOOD = jsonl(INV, OK, *REST)  # one critical section and the final read: judged VALID
AFTER = f"line {2 + len(REST) + 1}"  # the first line after GOOD
NEXT = {"index": 2 + len(REST), "time_ns": 9000}  # index and time of an op after GOOD


def bad(**fields) -> str:
    """GOOD with its second op's `fields` changed (None removes a field)."""
    op = {k: v for k, v in {**OK, **fields}.items() if not (k in fields and fields[k] is None)}
    return jsonl(INV) + json.dumps(op) + "\n" + jsonl(*REST)


def spec(text: str | bytes) -> dict:
    return {"history.jsonl": GOOD, "spec.json": text}


FIXTURES: dict[str, dict] = {
    # item 1: histories that cannot have happened or are typed wrongly
    "not-utf8": {"history.jsonl": GOOD.encode() + b'{"time_ns": 5000, "process": 1, "type": "invoke", "f": "acq\xffuire"}\n'},
    "not-utf8-first": {"history.jsonl": b"\xfe\xfe\n" + GOOD.encode()},
    "latin1-key": {"history.jsonl": jsonl(INV).encode() + json.dumps(OK, ensure_ascii=False).replace(
        '"lock"', '"l\u00f6ck"').encode("latin-1") + b"\n"},
    "array-line": {"history.jsonl": jsonl(INV) + "[1, 2, 3]\n"},
    "string-line": {"history.jsonl": jsonl(INV) + '"acquire"\n'},
    "number-line": {"history.jsonl": "42\n" + GOOD},
    "null-line": {"history.jsonl": jsonl(INV) + "null\n" + jsonl(OK)},
    "not-json-middle": {"history.jsonl": jsonl(INV) + "{oops\n" + jsonl(OK)},
    "garbage-last-line": {"history.jsonl": GOOD + "{not json}\n"},
    "nan-value": {"history.jsonl": jsonl(INV) + '{"time_ns": 2000, "process": 0, "type": "ok", "f": "acquire", "value": NaN}\n'},
    "infinity-time": {"history.jsonl": '{"time_ns": Infinity, "process": 0, "type": "invoke", "f": "acquire"}\n'},
    "huge-int": {"history.jsonl": '{"time_ns": 1' + "0" * 5000 + ', "process": 0, "type": "invoke", "f": "acquire"}\n'},
    "deep-nesting": {"history.jsonl": '{"time_ns": 1, "process": 0, "type": "invoke", "f": "acquire", "value": '
                     + "[" * 100_000 + "]" * 100_000 + "}\n"},
    "missing-f": {"history.jsonl": bad(f=None)},
    "type-done": {"history.jsonl": bad(type="done")},
    "type-number": {"history.jsonl": bad(type=3)},
    "time-string": {"history.jsonl": bad(time_ns="2000")},
    "time-bool": {"history.jsonl": bad(time_ns=True)},
    "time-negative": {"history.jsonl": jsonl({**INV, "time_ns": -5})},
    "time-float": {"history.jsonl": bad(time_ns=2000.5)},
    "time-2^64": {"history.jsonl": bad(time_ns=2**64)},
    "process-float": {"history.jsonl": bad(process=0.0)},
    "process-null": {"history.jsonl": jsonl(INV, {**OK, "process": None})},
    "process-bool": {"history.jsonl": jsonl({**INV, "process": True})},
    "process-list": {"history.jsonl": jsonl({**INV, "process": [0]})},
    "f-number": {"history.jsonl": bad(f=7)},
    "index-negative": {"history.jsonl": bad(index=-1)},
    "index-string": {"history.jsonl": bad(index="1")},
    "index-float": {"history.jsonl": bad(index=1.0)},
    "index-bool": {"history.jsonl": jsonl({**INV, "index": False})},
    "token-string": {"history.jsonl": bad(token="abc")},
    "token-float": {"history.jsonl": bad(token=1.5)},
    "token-bool": {"history.jsonl": bad(token=True)},
    "key-number": {"history.jsonl": bad(key=5)},
    "node-list": {"history.jsonl": bad(node=["n1"])},
    "error-object": {"history.jsonl": bad(error={"why": "timeout"})},
    "duplicate-index": {"history.jsonl": bad(index=0)},
    "index-decreasing": {"history.jsonl": jsonl(INV, OK, {**REST[0], "index": 7}, {**REST[1], "index": 5})},
    "time-backwards": {"history.jsonl": bad(time_ns=500)},
    "completion-first": {"history.jsonl": jsonl(OK, *REST)},
    "completion-other-process": {"history.jsonl": bad(process=1)},
    "completion-other-f": {"history.jsonl": bad(f="release")},
    "two-invokes": {"history.jsonl": jsonl(INV, {**INV, "index": 1, "time_ns": 2000})},
    "nemesis-two-invokes": {"history.jsonl": jsonl(
        {"index": 0, "time_ns": 1, "process": "nemesis", "type": "invoke", "f": "kill"},
        {"index": 1, "time_ns": 2, "process": "nemesis", "type": "invoke", "f": "start"})},
    "final-without-invoke": {"history.jsonl": jsonl(INV, OK, *REST[:-2], {**REST[-1], "index": 8})},
    "history-is-fifo": {"history.jsonl": FIFO},
    "history-is-dir": {"history.jsonl": DIR},
    "no-history": {"spec.json": "{}"},
    # what the harness itself writes and relies on: accepted, judged as usual
    "torn-last-line": {"history.jsonl": GOOD + '{"index": 10, "time_ns": 9000, "proc'},
    "never-completed": {"history.jsonl": GOOD + jsonl({**INV, **NEXT, "process": 1})},
    "no-indexes": {"history.jsonl": jsonl(*({k: v for k, v in o.items() if k != "index"} for o in (INV, OK, *REST)))},
    "nemesis-and-final": {"history.jsonl": jsonl(
        {"index": 0, "time_ns": 500, "process": "nemesis", "type": "invoke", "f": "kill", "value": ["n1"]},
        {**INV, "index": 1}, {**OK, "index": 2},
        {"index": 3, "time_ns": 2500, "process": "nemesis", "type": "info", "f": "kill", "value": ["n1"], "error": "gone"},
        *({**o, "index": o["index"] + 2} for o in REST))},
    # item 2: stored specs
    "spec-not-json": spec('{\n  "backend": "redis",\n  "ttl_ms": 2000,,\n}\n'),
    "spec-array": spec('["redis"]'),
    "spec-unknown-field": spec('{"backend": "redis", "ttl": 2000}'),
    "spec-ttl-string": spec('{"ttl_ms": "2000"}'),
    "spec-fencing-string": spec('{"fencing": "yes"}'),
    "spec-time-nan": spec('{"time_limit": NaN}'),
    "spec-nemesis-string": spec('{"nemesis": "kill"}'),
    "spec-options-list": spec('{"options": ["a=b"]}'),
    "spec-not-utf8": spec(b'{"backend": "r\xe9dis"}'),
    "spec-is-dir": {"history.jsonl": GOOD, "spec.json": DIR},
    "spec-is-fifo": {"history.jsonl": GOOD, "spec.json": FIFO},
    "spec-empty": spec(""),
    # a matrix dir whose matrix.csv has its header and no cell (a matrix stopped before any run ended)
    "matrix-no-cells": {"matrix.csv": "backend,nemesis,fencing,seed,valid,violations\n"},
}

H = "{hist:%s}"
R = "{run:%s}"


def check(name: str, words: str = "", code: int = 254, *, cmd: str = "check", path: str = H,
          extra: tuple[str, ...] = ()) -> Row:
    return row(f"{cmd}-{name}", cmd, path % name, *extra, code=code, words=words)


BARE_TTL = ("--ttl", "2000")  # a history without spec.json says no TTL: chaos check is told it (issue 37)


HOSTILE_IDS = {"dotdot": "..", "slash": "/", "dotdot-x": "../x", "deep-tmp": "../../../tmp/x",
               "spaces": "ab cd ef", "long": "a" * 300, "ZZZZZZ": "ZZZZZZ", "empty": "",
               "upper-hex": "ABCDEF", "newline": "abcdef\n", "dot": ".", "glob": "*", "dash": "-abcde"}

ROWS: list[Row] = [
    # ------------------------------------------------------------ chaos run: numbers
    run("time-limit-abc", "--time-limit", "abc", words="--time-limit"),
    run("time-limit-nan", "--time-limit", "nan", words="--time-limit"),
    run("time-limit-inf", "--time-limit", "inf", words="--time-limit"),
    run("time-limit-minus-inf", "--time-limit", "-inf", words="--time-limit"),
    run("time-limit-negative", "--time-limit", "-3", words="--time-limit"),
    run("time-limit-zero", "--time-limit", "0", words="--time-limit"),
    run("time-limit-huge", "--time-limit", "1e12", words="--time-limit"),
    run("recovery-nan", "--recovery", "nan", words="--recovery"),
    run("recovery-negative", "--recovery", "-1", words="--recovery"),
    run("recovery-not-shorter", "--recovery", "1", words="--recovery"),
    run("recovery-inf", "--recovery", "inf", words="--recovery"),
    run("concurrency-abc", "--concurrency", "abc", words="--concurrency"),
    run("concurrency-zero", "--concurrency", "0", words="--concurrency"),
    run("concurrency-negative", "--concurrency", "-1", words="--concurrency"),
    run("concurrency-huge", "--concurrency", "100000", words="--concurrency"),
    run("seed-abc", "--seed", "abc", words="--seed"),
    run("seed-negative", "--seed", "-1", words="--seed"),
    run("seed-float", "--seed", "1.5", words="--seed"),
    run("seed-huge", "--seed", "9" * 30, words="--seed"),
    run("ttl-abc", "--ttl", "abc", words="--ttl"),
    run("ttl-zero", "--ttl", "0", words="--ttl"),
    run("ttl-negative", "--ttl", "-5", words="--ttl"),
    run("ttl-huge", "--ttl", "99999999999", words="--ttl"),
    run("acquire-timeout-nan", "--acquire-timeout", "nan", words="--acquire-timeout"),
    run("acquire-timeout-zero", "--acquire-timeout", "0", words="--acquire-timeout"),
    run("acquire-timeout-negative", "--acquire-timeout", "-1", words="--acquire-timeout"),
    run("acquire-timeout-inf", "--acquire-timeout", "inf", words="--acquire-timeout"),
    run("hold-max-negative", "--hold-max", "-1", words="--hold-max"),
    run("hold-max-abc", "--hold-max", "abc", words="--hold-max"),
    run("hold-max-above-ttl", "--hold-max", "99999999", words="--hold-max"),
    run("nemesis-interval-tiny", "--nemesis", "pause-holder", "--nemesis-interval", "0.000001", words="--nemesis-interval"),
    run("nemesis-interval-nan", "--nemesis-interval", "nan", words="--nemesis-interval"),
    run("nemesis-interval-zero", "--nemesis-interval", "0", words="--nemesis-interval"),
    run("nemesis-interval-negative", "--nemesis-interval", "-1", words="--nemesis-interval"),
    run("clock-jump-nan", "--nemesis", "clock-skew", "--clock-jump", "nan", words="--clock-jump"),
    run("clock-jump-inf", "--clock-jump", "inf", words="--clock-jump"),
    run("clock-jump-zero", "--clock-jump", "0", words="--clock-jump"),
    run("clock-jump-huge", "--clock-jump", "1e30", words="--clock-jump"),
    run("base-port-zero", "--base-port", "0", words="--base-port"),
    run("base-port-70000", "--base-port", "70000", words="--base-port"),
    run("base-port-negative", "--base-port", "-1", words="--base-port"),
    run("base-port-abc", "--base-port", "abc", words="--base-port"),
    # ------------------------------------------------------------ chaos run: names and options
    run("unknown-backend", "--backend", "redlok", words="redlok"),
    run("unknown-nemesis", "--nemesis", "clock-skw", words="clock-skw"),
    run("unknown-nemesis-in-list", "--nemesis", "kill,,nope", words="nope"),
    run("unknown-cluster", "--cluster", "kubernetes", words="--cluster"),
    # ------------------------------------------------------------ chaos run --client (the client protocol)
    row("run-client-without-servers", "run", "--client", "./mylock", "--time-limit", "1", "--store", "{store}",
        words="--servers"),
    row("run-servers-without-client", "run", "--servers", "etcd:3", "--time-limit", "1", "--store", "{store}",
        words="--servers goes with --client"),
    row("run-client-and-backend", "run", "--client", "./mylock", "--servers", "etcd:3", "--backend", "redis",
        "--time-limit", "1", "--store", "{store}", words="drop --backend"),
    row("run-client-bad-kind", "run", "--client", "./mylock", "--servers", "mysql:3", "--time-limit", "1",
        "--store", "{store}", words="KIND:COUNT"),
    row("run-client-zero-servers", "run", "--client", "./mylock", "--servers", "etcd:0", "--time-limit", "1",
        "--store", "{store}", words="KIND:COUNT"),
    row("run-client-empty-command", "run", "--client", " ", "--servers", "etcd:3", "--time-limit", "1",
        "--store", "{store}", words="needs its command"),
    row("client-check-bad-servers", "client-check", "./mylock", "--servers", "etcd", words="KIND:COUNT"),
    row("client-check-no-servers", "client-check", "./mylock", words="--servers"),
    run("unknown-flag", "--time-limitt", "3", words="--time-limitt"),
    run("option-bool-maybe", "-o", "appendonly=maybe", words="appendonly"),
    run("option-bool-empty", "-o", "appendonly=", words="appendonly"),
    run("option-number-abc", "--nemesis", "pause-holder", "-o", "pause_multiple=abc", words="pause_multiple"),
    run("option-number-nan", "--nemesis", "pause-holder", "-o", "pause_multiple=nan", words="pause_multiple"),
    run("option-zk-negative", "--backend", "zookeeper", "-o", "session_timeout_ms=-1", words="session_timeout_ms"),
    run("option-typo", "--nemesis", "pause-holder", "-o", "pause_multiplee=3", words="pause_multiplee"),
    run("option-no-name", "-o", "=x", words="=x"),
    run("option-no-value", "-o", "novalue", words="novalue"),
    # ------------------------------------------------------------ chaos run: the number table (item 3)
    # every -o number: not finite, out of range, zero where zero means nothing (harness/core/options.py)
    *(run(f"option-{name}-{tag}", *extra, "-o", f"{name}={value}", words=name) for name, value, tag, extra in [
        ("pause_multiple", "inf", "inf", ("-n", "pause-holder")), ("pause_multiple", "0", "zero", ("-n", "pause-holder")),
        ("pause_multiple", "-1", "negative", ("-n", "pause-holder")), ("delay_ms", "nan", "nan", ("-n", "slow-link")),
        ("loss", "1.5", "above-one", ("-n", "slow-link")), ("loss", "-0.1", "negative", ("-n", "slow-link")),
        ("rate_kbit", "1e3", "float", ("-n", "slow-link")), ("jitter_ms", "inf", "inf", ("-n", "slow-link")),
        ("max_history_mb", "0", "zero", ()), ("load_clients", "-1", "negative", ()),
        ("margin_ms", "inf", "inf", ("--hold-until-expiry",)), ("margin_ms", "-5", "negative", ("--hold-until-expiry",)),
        ("num_extensions", "99999999999", "huge", ("-b", "pottery")),
        ("session_timeout_ms", "nan", "nan", ("-b", "zookeeper")), ("respawn_after", "nan", "nan", ("-n", "kill-holder")),
        ("cut_ms", "0", "zero", ("-n", "cut-in-flight")), ("drift_rate", "0", "zero", ("-n", "clock-skew")),
        ("strobe_ms", "1", "tiny", ("-n", "clock-skew")), ("clock_jump_jitter", "inf", "inf", ("-n", "clock-skew")),
        ("cut_servers", "0", "zero", ("-n", "partition-client")), ("after_renews", "0", "zero", ("-n", "pause-holder")),
        ("keepalive_interval_ms", "0", "zero", ("-b", "etcd")), ("node_timeout_ms", "0", "zero", ()),
        ("retry_delay_ms", "-1", "negative", ()), ("op_timeout_ms", "inf", "inf", ("-b", "etcd")),
        ("connect_timeout_s", "0", "zero", ("-b", "zookeeper")), ("watch_recheck_ms", "nan", "nan", ("-b", "etcd")),
        ("crash_between", "2", "above-one", ("-b", "redis-setnx-expire")), ("drift_factor", "1", "one", ()),
        ("watchdog_interval_ms", "-inf", "minus-inf", ("-o", "watchdog=true"))]),
    run("keys-zero", "--keys", "0", words="--keys"),
    run("keys-huge", "--keys", "10000000", words="--keys"),
    run("repeat-zero", "--repeat", "0", words="--repeat"),
    run("hold-max-longer-than-run", "--ttl", "60000", "--hold-max", "30000", "--time-limit", "10", words="--hold-max"),
    run("margin-eats-the-lease", "--hold-until-expiry", "-o", "margin_ms=2000", words="margin_ms"),
    # ------------------------------------------------------------ chaos run: refused before any server starts (item 3)
    # the spec alone decides; rows with `earlier` keep an earlier run in {store}, named by its `latest`, which must not move
    run("pause-waiter-one-client", "-n", "pause-waiter", words="--concurrency 2", earlier="redis-pause-waiter"),
    run("partition-waiter-one-client", "-n", "partition-waiter", words="--concurrency 2"),
    run("kill-waiter-one-client", "-n", "kill-holder", "-o", "during=acquire", words="--concurrency 2"),
    run("kill-waiter-after-renews", "-n", "kill-holder", "-o", "during=acquire", "-o", "after_renews=2", "--renew",
        "-c", "2", words="drop -o after_renews"),
    run("pause-holder-needs-renew", "-n", "pause-holder", "-o", "after_renews=2", words="add --renew", earlier="redis-pause-holder"),
    run("kill-holder-needs-renew", "-n", "kill-holder", "-o", "after_renews=2", words="add --renew"),
    run("cut-renew-needs-renew", "-n", "cut-in-flight", "-o", "during=renew", words="add --renew", earlier="redis-cut-in-flight"),
    run("pause-waiter-after-renews", "-n", "pause-waiter", "-c", "2", "-o", "after_renews=1", words="drop -o after_renews"),
    run("partition-one-server", "-n", "partition", words="partition-client", earlier="redis-partition"),
    run("partition-bridge-two-servers", "--backend", "external", "-o", "command=./mylock", "-o", "servers=etcd:2",
        "-n", "partition", "-o", "partition_shape=bridge", words="at least 3"),
    run("cut-more-servers-than-there-are", "-b", "redlock", "-n", "partition-client", "-o", "cut_servers=9",
        words="cut_servers=9"),
    run("slow-link-changes-nothing", "-n", "slow-link", "-o", "delay_ms=0", words="changes nothing"),
    run("slow-link-between-one-server", "-n", "slow-link", "-o", "between=servers", words="two lock servers"),
    run("partition-without-netns", "-b", "redlock", "-n", "partition", "--no-netns", words="drop --no-netns"),
    run("cut-in-flight-without-netns", "-n", "cut-in-flight", "--no-netns", words="drop --no-netns"),
    run("drift-rate-one", "-n", "clock-skew", "-o", "clock_mode=drift", "-o", "drift_rate=1", words="drift_rate"),
    run("strobe-longer-than-a-fault", "-n", "clock-skew", "-o", "clock_mode=strobe", "-o", "strobe_ms=5000",
        words="strobe_ms"),
    run("load-clients-with-a-fault", "-n", "pause-holder", "-o", "load_clients=2", words="one process per client", earlier="redis-pause-holder"),
    run("no-fault-fits-pause", "-n", "pause-holder", "--time-limit", "3", words="no fault fits", earlier="redis-pause-holder"),
    run("no-fault-fits-interval", "-b", "redlock", "-n", "partition", "--time-limit", "4", "--nemesis-interval", "8",
        words="no fault fits"),
    run("rw-on-redis", "--lock", "rw", words="--lock rw", earlier="redis-none-rw"),
    row("run-rw-on-reference-client", "run", "--client", "{tmp}/clients/go-etcd/bin/go-etcd", "--servers", "etcd:3",
        "--lock", "rw", "--time-limit", "1", "--store", "{store}", words="go-etcd has no rw lock"),
    row("run-rw-through-relay-of-redis", "run", "--client", "python3 clients/python-relay/relay.py --backend redis",
        "--servers", "valkey:1", "--lock", "rw", "--time-limit", "1", "--store", "{store}", words="zookeeper-recipe"),
    row("run-option-lock-against-flag", "run", "--client", "./mylock", "--servers", "valkey:1", "-o", "lock=rw",
        "--time-limit", "1", "--store", "{store}", words="-o lock is set by --lock"),
    row("run-option-command-with-client", "run", "--client", "./mylock", "--servers", "valkey:1", "-o", "command=./x",
        "--time-limit", "1", "--store", "{store}", words="-o command"),
    run("option-given-twice", "-o", "node_timeout_ms=50", "-o", "node_timeout_ms=80", words="given twice"),
    run("option-given-twice-spaced", "-o", "appendonly=yes", "-o", " appendonly =no", words="given twice"),
    # ------------------------------------------------------------ chaos run: paths
    run("store-is-file", "--store", "{file}", words="--store"),
    run("store-in-proc", "--store", "/proc/x", words="--store"),
    run("store-under-file", "--store", "{file}/runs", words="--store"),
    run("junit-dir-missing", "--junit", "{tmp}/no/such/dir/results.xml", words="--junit"),
    run("junit-is-dir", "--junit", "{tmp}", words="--junit"),
    run("junit-in-proc", "--junit", "/proc/x.xml", words="--junit"),
    # ------------------------------------------------------------ chaos cluster down
    *(row(f"down-{k}", "cluster", "down", "--", v, words="run id", guard="hostile-id") for k, v in HOSTILE_IDS.items()),
    row("down-unknown-id", "cluster", "down", "abcdef", words="nothing was removed"),
    # ------------------------------------------------------------ chaos check: histories (item 1)
    check("not-utf8", AFTER), check("not-utf8-first", "line 1"), check("latin1-key", "line 2"),
    check("array-line", "line 2"), check("string-line", "line 2"), check("number-line", "line 1"),
    check("null-line", "line 2"), check("not-json-middle", "line 2"), check("garbage-last-line", AFTER),
    check("nan-value", "line 2"), check("infinity-time", "line 1"), check("huge-int", "line 1"),
    check("deep-nesting", "line 1"), check("missing-f", "line 2"), check("type-done", "type 'done'"),
    check("type-number", "line 2"), check("time-string", "time_ns"), check("time-bool", "time_ns"),
    check("time-negative", "time_ns"), check("time-float", "time_ns"), check("time-2^64", "time_ns"),
    check("process-float", "process"), check("process-null", "process"),
    # any JSON scalar is a process id (issue 37): true is process "true", judged (nothing to judge)
    check("process-bool", "no critical section completed", code=2),
    check("process-list", "process"), check("f-number", "line 2"), check("index-negative", "index"),
    check("index-string", "index"), check("index-float", "index"), check("index-bool", "index"),
    check("token-string", "token"), check("token-float", "token"), check("token-bool", "token"),
    check("key-number", "key"), check("node-list", "node"), check("error-object", "error"),
    check("duplicate-index", "index 0"), check("index-decreasing", "line 4"), check("time-backwards", "line 2"),
    check("completion-first", "line 1"), check("completion-other-process", "line 2"),
    check("completion-other-f", "line 2"), check("two-invokes", "line 2"), check("nemesis-two-invokes", "line 2"),
    check("final-without-invoke", f"line {len(REST) + 1}"), check("history-is-fifo", "regular file"),
    check("history-is-dir", "directory"), check("no-history", "history.jsonl", path=R),
    check("torn-last-line", code=0, extra=BARE_TTL), check("never-completed", code=0, extra=BARE_TTL),
    check("no-indexes", code=0, extra=BARE_TTL), check("nemesis-and-final", code=0, extra=BARE_TTL),
    row("check-nonexistent", "check", "{tmp}/nope", words="does not exist"),
    row("check-dev-zero", "check", "/dev/zero", words="regular file"),
    row("check-unreadable", "check", "/proc/self/mem", words="cannot read"),
    row("check-model-unknown", "check", H % "never-completed", "--model", "queue", words="--model"),
    row("check-time-limit-nan", "check", H % "never-completed", "--time-limit", "nan", words="--time-limit"),
    row("check-time-limit-negative", "check", H % "never-completed", "--time-limit", "-1", words="--time-limit"),
    # ------------------------------------------------------------ chaos check / report: specs (item 2)
    check("spec-not-json", "line 3", path=R), check("spec-array", "spec.json", path=R),
    check("spec-unknown-field", "ttl", path=R), check("spec-ttl-string", "ttl_ms", path=R),
    check("spec-fencing-string", "fencing", path=R), check("spec-time-nan", "spec.json", path=R),
    check("spec-nemesis-string", "nemesis", path=R), check("spec-options-list", "options", path=R),
    check("spec-not-utf8", "UTF-8", path=R), check("spec-is-dir", "spec.json", path=R),
    check("spec-is-fifo", "spec.json", path=R), check("spec-empty", "spec.json", path=H),
    check("not-utf8", AFTER, cmd="report", path=R), check("two-invokes", "line 2", cmd="report", path=R),
    check("spec-not-json", "line 3", cmd="report", path=R), check("spec-unknown-field", "ttl", cmd="report", path=R),
    check("no-history", "history.jsonl", cmd="report", path=R),
    row("report-on-a-file", "report", H % "never-completed", words="run directory"),
    row("report-nonexistent", "report", "{tmp}/nope", words="does not exist"),
    row("report-empty-store", "report", "{store}", words="no runs"),
    # ------------------------------------------------------------ chaos serve
    row("serve-port-zero", "serve", "--store", "{store}", "--port", "0", words="--port"),
    row("serve-port-70000", "serve", "--store", "{store}", "--port", "70000", words="--port"),
    row("serve-port-negative", "serve", "--store", "{store}", "--port", "-1", words="--port"),
    row("serve-port-abc", "serve", "--store", "{store}", "--port", "abc", words="--port"),
    row("serve-port-in-use", "serve", "--store", "{store}", "--port", "{busy_port}", words="in use"),
    row("serve-store-missing", "serve", "--store", "{tmp}/nope", "--port", "{busy_port}", words="--store"),
    row("serve-store-is-file", "serve", "--store", "{file}", "--port", "{busy_port}", words="--store"),
    # ------------------------------------------------------------ chaos explore
    *(row(f"explore-{k}", "explore", "-b", "redis", "--time-limit", "5", "--store", "{store}", *a, words=w) for k, a, w in [
        ("lo-nan", ("--lo", "nan"), "--lo"), ("lo-negative", ("--lo", "-1"), "--lo"),
        ("hi-inf", ("--hi", "inf"), "--hi"), ("hi-nan", ("--hi", "nan"), "--hi"),
        ("steps-negative", ("--steps", "-1"), "--steps"), ("steps-abc", ("--steps", "abc"), "--steps"),
        ("seeds-zero", ("--seeds", "0"), "--seeds"), ("ttl-zero", ("--ttl", "0"), "--ttl"),
        ("time-limit-nan", ("--time-limit", "nan"), "--time-limit"),
        ("time-limit-negative", ("--time-limit", "-1"), "--time-limit"),
        ("store-is-file", ("--store", "{file}"), "--store")]),
    row("explore-unknown-backend", "explore", "-b", "redlok", "--store", "{store}", words="redlok"),
    # ------------------------------------------------------------ chaos matrix
    *(row(f"matrix-{k}", "matrix", "--backends", "redis", "--nemeses", "none", "--fencing", "off", "--seeds", "1",
          "--time-limit", "1", "--concurrency", "1", "--store", "{store}", *a, words=w) for k, a, w in [
        ("seeds-zero", ("--seeds", "0"), "--seeds"), ("seeds-abc", ("--seeds", "abc"), "--seeds"),
        ("time-limit-nan", ("--time-limit", "nan"), "--time-limit"),
        ("time-limit-inf", ("--time-limit", "inf"), "--time-limit"),
        ("time-limit-half", ("--time-limit", "0.5"), "--time-limit"),
        ("concurrency-zero", ("--concurrency", "0"), "--concurrency"),
        ("parallel-zero", ("--parallel", "0"), "--parallel"), ("parallel-huge", ("--parallel", "1000"), "--parallel"),
        ("unknown-backend", ("--backends", "redlok"), "redlok"), ("unknown-nemesis", ("--nemeses", "nope"), "nope"),
        ("junit-dir-missing", ("--junit", "{tmp}/no/such/dir/m.xml"), "--junit"),
        ("store-is-file", ("--store", "{file}"), "--store"),
        ("expectations-missing", ("--expectations", "{tmp}/nope.toml"), "nope.toml"),
        ("recheck-missing", ("--recheck", "{tmp}/nope"), "nope"),
        ("recheck-no-cells", ("--recheck", R % "matrix-no-cells"), "nothing to re-judge"),
        ("no-fault-fits", ("--nemeses", "none,pause-holder", "--time-limit", "6"), "too short for --nemeses pause-holder")]),
    # ------------------------------------------------------------ chaos reproduce
    *(row(f"reproduce-{k}", "reproduce", "gc-pause", "--time-limit", "5", "--store", "{store}", *a, words=w) for k, a, w in [
        ("seeds-zero", ("--seeds", "0"), "--seeds"), ("seeds-abc", ("--seeds", "abc"), "--seeds"),
        ("time-limit-nan", ("--time-limit", "nan"), "--time-limit"),
        ("time-limit-inf", ("--time-limit", "inf"), "--time-limit"),
        ("first-seed-negative", ("--first-seed", "-1"), "--first-seed"),
        ("first-seed-abc", ("--first-seed", "abc"), "--first-seed"),
        ("first-seed-huge", ("--first-seed", "9" * 20), "--first-seed"),
        ("store-is-file", ("--store", "{file}"), "--store")]),
    row("reproduce-unknown-scenario", "reproduce", "gc-paus", "--store", "{store}", words="gc-paus"),
    row("reproduce-no-pause-fits", "reproduce", "gc-pause", "--time-limit", "8", "--store", "{store}",
        words="no fault fits"),
    row("reproduce-all-no-fault-fits", "reproduce", "--all", "--time-limit", "10", "--store", "{store}",
        words="scenario etcd-lock-pause"),
    row("reproduce-summarize-missing", "reproduce", "--summarize", "{tmp}/nope", words="nope"),
    row("reproduce-summarize-not-utf8", "reproduce", "--summarize", H % "not-utf8", words="UTF-8"),
]

assert len({r.id for r in ROWS}) == len(ROWS), "row ids must be unique"
