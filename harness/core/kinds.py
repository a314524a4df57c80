"""Lock kinds: the mutex, the read-write lock and the counting semaphore (`--lock`).

A kind is what a lock promises about who may hold it at once:

  mutex          one holder at a time (every backend)
  rw             a writer holds alone; readers may hold together, never with a writer
  semaphore:N    at most N holders at once (N permits)

A backend lists the kinds it has in its class attribute `lock_kinds` (default: only
"mutex"). For any other kind its `acquire` takes the keywords `mode` ("read" or
"write", for rw) and `permits` (N, for a semaphore) and must refuse neither; for the
mutex the worker calls `acquire(key, ttl_ms, timeout_s)` as it always did.

The history carries the kind on every acquire, not the spec (a checker reads the
history only, and `chaos check` takes foreign histories): an rw acquire has `mode`, a
semaphore acquire has `permits`, a mutex acquire neither. `of_history` reads it back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from harness.core.errors import BadArgument

KINDS = ("mutex", "rw", "semaphore")
MODES = ("read", "write")
MAX_PERMITS = 1024
READ_SHARE = 0.7  # share of rw cycles that ask to read: readers overlap often enough to be seen


@dataclass(frozen=True, slots=True, kw_only=True)
class LockKind:
    name: str = "mutex"
    permits: int = 1  # a semaphore's N; 1 for the others

    def __str__(self) -> str:
        return f"semaphore:{self.permits}" if self.name == "semaphore" else self.name

    @property
    def suffix(self) -> str:
        """Part of a run's name ("" for the mutex)."""
        return {"mutex": "", "rw": "-rw"}.get(self.name, f"-sem{self.permits}")

    def acquire_args(self, mode: str | None) -> dict[str, Any]:
        """The keywords a worker passes to acquire, and records on its acquire ops."""
        if self.name == "rw":
            return {"mode": mode or "write"}
        if self.name == "semaphore":
            return {"permits": self.permits}
        return {}


def parse(text: Any) -> LockKind:
    """A LockKind from `--lock` text, or BadArgument naming what is accepted."""
    if isinstance(text, LockKind):
        return text
    if not isinstance(text, str):
        raise BadArgument(f"--lock must be mutex, rw or semaphore:N, not {text!r}")
    if text in ("mutex", "rw"):
        return LockKind(name=text)
    m = re.fullmatch(r"semaphore:(\d{1,5})", text)
    if m is None:
        raise BadArgument(f"--lock {text!r} is not a lock kind; choose mutex, rw or semaphore:N (N permits, "
                          f"1 to {MAX_PERMITS})")
    n = int(m.group(1))
    if not 1 <= n <= MAX_PERMITS:
        raise BadArgument(f"--lock semaphore:{n} must have between 1 and {MAX_PERMITS} permits")
    return LockKind(name="semaphore", permits=n)


def kinds_of(cls: Any) -> tuple[str, ...]:
    return tuple(getattr(cls, "lock_kinds", ("mutex",)))


def require(backend: str, cls: Any, kind: LockKind, options: Any = None) -> None:
    """Refuse, in one sentence, a kind the backend does not have. A backend whose kinds depend
    on its options (an external client: the reference clients' are known) says so through
    `kind_refusal(options, kind)`, a sentence or None."""
    have = kinds_of(cls)
    if kind.name not in have:
        raise BadArgument(f"backend {backend!r} has no {kind.name} lock (it has: {', '.join(have)}); "
                          f"--lock {kind.name} works with: {', '.join(backends_with(kind.name)) or 'no backend'}")
    told = getattr(cls, "kind_refusal", None)
    if callable(told) and (why := told(options or {}, kind)):
        raise BadArgument(why)


def backends_with(kind: str) -> list[str]:
    """The backends (built in and plug-ins) that list `kind`; one that cannot load is left out."""
    from harness.core import plugins

    out = []
    for name in plugins.backend_names():
        try:
            if kind in kinds_of(plugins.backend_class(name)):
                out.append(name)
        except Exception:
            pass  # a plug-in that cannot load has no kinds to offer here
    return out


def of_history(ops: Iterable[Any]) -> LockKind:
    """The kind a history's acquires carry: `permits` makes a semaphore, `mode` an rw
    lock, neither a mutex. Acquires that disagree are refused (BadArgument)."""
    seen: set[tuple[str, int]] = set()
    for op in ops:
        if op.f != "acquire":
            continue
        if op.permits is not None:
            seen.add(("semaphore", op.permits))
        elif op.mode is not None:
            seen.add(("rw", 1))
        elif op.type == "invoke":
            seen.add(("mutex", 1))
    if len(seen) > 1:
        raise BadArgument(f"the history's acquires mix lock kinds ({', '.join(sorted(f'{n}:{p}' for n, p in seen))}); "
                          "one run checks one kind")
    name, permits = next(iter(seen), ("mutex", 1))
    return LockKind(name=name, permits=permits)
