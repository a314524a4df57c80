"""Shift the wall clock of one running process by patching its vDSO (TimeChaos-style).

libfaketime cannot skew a Go server: Go reads the clock through the vDSO, never through libc.
This module does what Chaos Mesh's TimeChaos does, on the local machine, for x86_64 Linux:

  1. Stop every thread of the process with PTRACE_SEIZE + PTRACE_INTERRUPT.
  2. Make one thread run `mmap` (its registers pointed at a `syscall` byte pair inside the
     vDSO, single-stepped once, registers restored) to get one private page.
  3. Write a small position-independent stub into that page (`_STUB_ASM` below) and
     overwrite the first 12 bytes of `__vdso_clock_gettime`, `__vdso_gettimeofday` and
     `__vdso_time` in *that process's* vDSO with `movabs rax, stub; jmp rax`. Code that
     resolved the vDSO symbol at startup (Go's runtime, glibc) jumps into the stub.
  4. Detach. The stub makes the real syscall and adds the offset stored in its own page.
Later calls find the stub from the jump itself and only rewrite the offset (double-buffered
slot, then a one-byte switch, through /proc/<pid>/mem): no stop, effective at once, in
every thread. Offset 0 makes the clocks true again (the patch stays, at syscall cost).

What it reaches: clock_gettime for CLOCK_REALTIME, _COARSE, _ALARM and CLOCK_TAI (and, with
`monotonic=True`, CLOCK_MONOTONIC, _RAW, _COARSE, CLOCK_BOOTTIME, _ALARM), gettimeofday and
time(), whenever they are called through the vDSO (Go's time.Now and runtime nanotime, and
glibc's clock_gettime/gettimeofday/time).

What it does not reach: raw syscalls that bypass the vDSO (Go's fallback when the process
has no vDSO, `syscall(SYS_clock_gettime)`, statically linked code that never looked the vDSO
up), the clock the kernel itself uses for timeouts (futex, epoll, nanosleep, timerfd,
SO_RCVTIMEO: a jump does not make a sleeping thread wake early), file timestamps, and other
processes. A child forked after the patch inherits it; exec drops it.

Leftovers: none on the host. The page and the patched vDSO bytes live only in that process's
private memory and die with it. If the harness is killed in the middle of the injection the
process keeps running (ptrace detaches on tracer exit) but may be left with a half-done
patch; kill and restart that node.

Must not: be pointed at a process the harness did not start; run while another debugger is
attached (ptrace refuses, and we say so).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import signal
import struct
import subprocess
import sys
import threading
import time

from harness.core.errors import NemesisError

__all__ = ["supported", "set_offset", "get_offset"]

# --- the stub --------------------------------------------------------------------------------
# Page layout (offsets from the page start; the stub finds it with rip-relative lea):
#   0x000 magic          0x010 active slot (low bit of one byte; the only thing a reader races)
#   0x020 slot 0: u64 clock-id mask, i64 offset in ns       0x030 slot 1: same
#   0x040 3 x (u64 patched address, 16 original bytes)      0x100.. code
# Assembled with `as --64` from _STUB_ASM; tests/integration/cluster/test_timewarp.py re-assembles it
# and checks the bytes below, so the source and the bytes cannot drift apart.
_STUB_ASM = """
.intel_syntax noprefix
.text
base:
.org 0x100
cg:                             # int clock_gettime(clockid_t rdi, struct timespec *rsi)
    mov eax, 228
    syscall                     # clobbers rcx, r11: caller-saved in the C ABI
    test rax, rax
    jnz 9f                      # error: return -errno, like the vDSO's own fallback
    cmp edi, 63
    ja 8f                       # dynamic (negative) clock ids: leave alone
    lea rdx, [rip + base]
    movzx ecx, byte ptr [rdx + 0x10]
    and ecx, 1
    shl ecx, 4
    add rdx, rcx                # rdx + 0x20 = active slot
    mov r8, [rdx + 0x20]
    bt r8, rdi
    jnc 8f
    mov rax, [rdx + 0x28]
    mov r9, 1000000000
    cqo
    idiv r9                     # rax = whole seconds, rdx = nanoseconds, same sign
    add rax, [rsi]
    add rdx, [rsi + 8]
    test rdx, rdx
    jns 1f
    add rdx, r9
    dec rax
    jmp 2f
1:  cmp rdx, r9
    jl 2f
    sub rdx, r9
    inc rax
2:  mov [rsi], rax
    mov [rsi + 8], rdx
8:  xor eax, eax
9:  ret
.org 0x180
gtod:                           # int gettimeofday(struct timeval *rdi, struct timezone *rsi)
    test rsi, rsi
    jz 1f
    mov eax, 96
    syscall                     # only to fill the timezone; tv is overwritten below
    test rax, rax
    jnz 9f
1:  test rdi, rdi
    jz 8f
    push rdi
    sub rsp, 16
    xor edi, edi
    mov rsi, rsp
    call cg
    mov rax, [rsp]
    mov rcx, [rsp + 8]
    add rsp, 16
    pop rdi
    mov [rdi], rax
    mov rax, rcx
    xor edx, edx
    mov ecx, 1000
    div rcx
    mov [rdi + 8], rax
8:  xor eax, eax
9:  ret
.org 0x200
tm:                             # time_t time(time_t *rdi)
    push rdi
    sub rsp, 16
    xor edi, edi
    mov rsi, rsp
    call cg
    mov rax, [rsp]
    add rsp, 16
    pop rdi
    test rdi, rdi
    jz 1f
    mov [rdi], rax
1:  ret
"""
_STUB_CODE = bytes.fromhex(
    "b8e40000000f054885c0755b83ff3f7754488d15e8feffff0fb64a1083e101c1e1044801ca4c8b4220490fa3f8"
    "7336488b422849c7c100ca9a3b489949f7f9480306480356084885d279084c01ca48ffc8eb0b4c39ca7c064c29"
    "ca48ffc04889064889560831c0c3" + "00" * 24 +
    "4885f6740cb8600000000f054885c075384885ff7431574883ec1031ff4889e6e85bffffff488b0424488b4c24"
    "084883c4105f4889074889c831d2b9e803000048f7f14889470831c0c3" + "00" * 54 +
    "574883ec1031ff4889e6e8f1feffff488b04244883c4105f4885ff7403488907c3"
)
_CODE_AT = 0x100
_ENTRY = {"__vdso_clock_gettime": 0x100, "__vdso_gettimeofday": 0x180, "__vdso_time": 0x200}
_MAGIC = b"CLTWARP\x01"
_ACTIVE = 0x10
_SLOT = (0x20, 0x30)
_SAVED = 0x40
_PAGE = 4096
_JUMP_LEN = 12  # movabs rax, imm64 (10) + jmp rax (2)

_REALTIME_IDS = (0, 5, 8, 11)      # REALTIME, REALTIME_COARSE, REALTIME_ALARM, TAI
_MONOTONIC_IDS = (1, 4, 6, 7, 9)   # MONOTONIC, _RAW, _COARSE, BOOTTIME, BOOTTIME_ALARM


def _jump(target: int) -> bytes:
    return b"\x48\xb8" + struct.pack("<Q", target) + b"\xff\xe0"


def _stub_from_jump(code: bytes) -> int | None:
    if len(code) >= _JUMP_LEN and code[:2] == b"\x48\xb8" and code[10:12] == b"\xff\xe0":
        return struct.unpack_from("<Q", code, 2)[0]
    return None


# --- ptrace through libc ---------------------------------------------------------------------
_PTRACE_CONT, _PTRACE_SINGLESTEP, _PTRACE_GETREGS, _PTRACE_SETREGS = 7, 9, 12, 13
_PTRACE_DETACH, _PTRACE_SEIZE, _PTRACE_INTERRUPT = 17, 0x4206, 0x4207
_PTRACE_EVENT_STOP = 128
_WALL = 0x40000000

_REGS = ("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags "
         "rsp ss fs_base gs_base ds es fs gs").split()


class _Regs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in _REGS]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_lock = threading.Lock()  # ptrace ties tracees to the attaching thread: one user at a time


class _Gone(Exception):
    """A thread exited while we held it."""


def _ptrace(req: int, tid: int, addr: int = 0, data: int | ctypes.c_void_p = 0) -> int:
    ctypes.set_errno(0)
    rc = _libc.ptrace(req, tid, ctypes.c_void_p(addr), data if isinstance(data, ctypes.c_void_p)
                      else ctypes.c_void_p(data))
    if rc == -1 and ctypes.get_errno():
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc


def _get_regs(tid: int) -> _Regs:
    regs = _Regs()
    _ptrace(_PTRACE_GETREGS, tid, 0, ctypes.c_void_p(ctypes.addressof(regs)))
    return regs


def _set_regs(tid: int, regs: _Regs) -> None:
    _ptrace(_PTRACE_SETREGS, tid, 0, ctypes.c_void_p(ctypes.addressof(regs)))


def _wait(tid: int) -> int:
    _, status = os.waitpid(tid, _WALL)
    if os.WIFEXITED(status) or os.WIFSIGNALED(status):
        raise _Gone(tid)
    return status


class _Stopped:
    """Every thread of `pid` seized and stopped; detached again on exit (signals that arrived
    meanwhile are re-sent to their thread, so none is lost)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.tids: list[int] = []
        self.resend: list[tuple[int, int]] = []

    def __enter__(self) -> _Stopped:
        try:
            seen: set[int] = set()
            while True:  # a running thread may spawn another until all are stopped
                new = [t for t in _tasks(self.pid) if t not in seen]
                if not new:
                    return self
                seized = []
                for tid in new:  # interrupt them all first, then wait: they stop in parallel
                    seen.add(tid)
                    try:
                        _ptrace(_PTRACE_SEIZE, tid)
                        seized.append(tid)
                        self.tids.append(tid)
                        _ptrace(_PTRACE_INTERRUPT, tid)
                    except OSError as e:
                        if e.errno == errno.ESRCH:
                            continue  # exited; if seized, the wait below reaps it
                        raise NemesisError(
                            f"cannot ptrace process {self.pid} (thread {tid}): {e.strerror}; "
                            "is a debugger attached, or is ptrace forbidden here?") from None
                for tid in seized:
                    try:
                        self._wait_stop(tid)
                    except (_Gone, ChildProcessError):
                        self.tids.remove(tid)
        except BaseException:
            self.__exit__(None, None, None)
            raise

    def _wait_stop(self, tid: int) -> None:
        while True:
            status = _wait(tid)
            if status >> 16 == _PTRACE_EVENT_STOP:
                return
            # signal-delivery-stop: hold the signal back, send it again on detach
            self.resend.append((tid, os.WSTOPSIG(status)))
            _ptrace(_PTRACE_CONT, tid)

    def step(self, tid: int, expect_rip: int) -> None:
        """Single-step `tid` until it has executed the instruction and sits at expect_rip."""
        for _ in range(64):
            _ptrace(_PTRACE_SINGLESTEP, tid)
            status = _wait(tid)
            sig = os.WSTOPSIG(status)
            if status >> 16 == 0 and sig == signal.SIGTRAP and _get_regs(tid).rip == expect_rip:
                return
            if status >> 16 == 0 and sig != signal.SIGTRAP:
                self.resend.append((tid, sig))
        raise NemesisError(f"process {self.pid} thread {tid} did not complete the injected syscall")

    def __exit__(self, *exc) -> None:
        for tid in self.tids:
            try:
                _ptrace(_PTRACE_DETACH, tid)
            except OSError:
                pass
        for tid, sig in self.resend:
            _libc.syscall(234, self.pid, tid, sig)  # tgkill; fails harmlessly if tid is gone
        self.tids = []


def _tasks(pid: int) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except FileNotFoundError:
        raise NemesisError(f"process {pid} does not exist (or exited)") from None


# --- target memory and its vDSO --------------------------------------------------------------
def _read(pid: int, addr: int, n: int) -> bytes:
    fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    try:
        return os.pread(fd, n, addr)
    finally:
        os.close(fd)


def _write(pid: int, addr: int, data: bytes) -> None:
    fd = os.open(f"/proc/{pid}/mem", os.O_RDWR)
    try:
        if os.pwrite(fd, data, addr) != len(data):
            raise OSError(errno.EIO, "short write")
    finally:
        os.close(fd)


def _vdso(pid: int) -> tuple[int, bytes]:
    try:
        maps = open(f"/proc/{pid}/maps").read()
    except FileNotFoundError:
        raise NemesisError(f"process {pid} does not exist (or exited)") from None
    for line in maps.splitlines():
        if line.endswith("[vdso]"):
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            return lo, _read(pid, lo, hi - lo)
    raise NemesisError(f"process {pid} has no vDSO, so it reads the clock by raw syscalls, "
                       "which timewarp cannot shift")


def _symbols(image: bytes) -> dict[str, int]:
    """Dynamic symbols of a vDSO image -> offsets from the image start."""
    if image[:4] != b"\x7fELF" or image[4] != 2:
        raise NemesisError("the vDSO is not a 64-bit ELF image; timewarp supports x86_64 only")
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    phoff, = struct.unpack_from("<Q", image, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", image, 0x36)
    load_vaddr = 0
    for i in range(phnum):
        p_type, _, p_off, p_vaddr = struct.unpack_from("<IIQQ", image, phoff + i * phentsize)
        if p_type == 1:  # PT_LOAD
            load_vaddr = p_vaddr - p_off
            break
    sections = [struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)]
    out: dict[str, int] = {}
    for _, sh_type, _, _, off, size, link, _, _, entsize in sections:
        if sh_type != 11:  # SHT_DYNSYM
            continue
        stroff = sections[link][4]
        for j in range(size // entsize):
            name, info, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", image, off + j * entsize)
            if shndx and info & 0xF == 2:  # defined STT_FUNC
                end = image.index(b"\0", stroff + name)
                out[image[stroff + name:end].decode()] = value - load_vaddr
    return out


def _targets(pid: int) -> tuple[int, bytes, dict[str, int]]:
    base, image = _vdso(pid)
    syms = _symbols(image)
    found = {name: base + syms[name] for name in _ENTRY if name in syms}
    if "__vdso_clock_gettime" not in found:
        raise NemesisError(f"process {pid}'s vDSO has no __vdso_clock_gettime")
    return base, image, found


def _page_of(pid: int) -> int | None:
    """The stub page of an already patched process, from its clock_gettime jump."""
    _, _, found = _targets(pid)
    entry = found["__vdso_clock_gettime"]
    page = _stub_from_jump(_read(pid, entry, _JUMP_LEN))
    if page is None:
        return None
    page -= _ENTRY["__vdso_clock_gettime"]
    if _read(pid, page, len(_MAGIC)) != _MAGIC:
        raise NemesisError(f"process {pid}'s clock_gettime is patched by something other than "
                           "chaoslock's timewarp; refusing to touch it")
    return page


# --- the offset ------------------------------------------------------------------------------
def _mask(monotonic: bool) -> int:
    ids = _REALTIME_IDS + (_MONOTONIC_IDS if monotonic else ())
    return sum(1 << i for i in ids)


def _slot(offset_s: float, monotonic: bool) -> bytes:
    return struct.pack("<Qq", _mask(monotonic), round(offset_s * 1e9))


def _update(pid: int, page: int, offset_s: float, monotonic: bool) -> None:
    # Write the idle slot whole, then flip the one byte readers look at first: a reader sees the
    # old pair or the new pair, never half of each.
    active = _read(pid, page + _ACTIVE, 1)[0] & 1
    _write(pid, page + _SLOT[1 - active], _slot(offset_s, monotonic))
    _write(pid, page + _ACTIVE, bytes([1 - active]))


def _inject(pid: int, offset_s: float, monotonic: bool) -> None:
    for _attempt in range(200):
        busy = False
        with _Stopped(pid) as stopped:
            if not stopped.tids:
                raise NemesisError(f"process {pid} exited before its clock could be shifted")
            base, image, found = _targets(pid)
            page = _page_of(pid)
            if page is not None:  # someone injected between our check and the stop
                _update(pid, page, offset_s, monotonic)
                return
            # A thread stopped inside the bytes we overwrite would resume in the middle of our
            # jump; let everyone run a moment and try again.
            rips = [_get_regs(t).rip for t in stopped.tids]
            if any(a < r < a + _JUMP_LEN for r in rips for a in found.values()):
                busy = True
                continue
            page = _mmap(stopped, base, image)
            saved = b"".join(struct.pack("<Q", a) + _read(pid, a, 16) for a in found.values())
            head = bytearray(_CODE_AT)
            head[:len(_MAGIC)] = _MAGIC
            head[_SLOT[0]:_SLOT[0] + 16] = _slot(offset_s, monotonic)
            head[_SAVED:_SAVED + len(saved)] = saved
            _write(pid, page, bytes(head) + _STUB_CODE)
            for name, addr in found.items():
                _write(pid, addr, _jump(page + _ENTRY[name]))
            return
        if busy:
            time.sleep(0.001)
    raise NemesisError(f"process {pid} kept a thread inside clock_gettime's first bytes; "
                       "could not patch it safely")


def _mmap(stopped: _Stopped, base: int, image: bytes) -> int:
    """Run mmap(NULL, 4096, PROT_READ|PROT_EXEC, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) in the
    target, in its main thread if it still has one."""
    tid = stopped.pid if stopped.pid in stopped.tids else stopped.tids[0]
    at = image.find(b"\x0f\x05")
    if at < 0:
        raise NemesisError(f"process {stopped.pid}'s vDSO has no syscall instruction to borrow")
    saved = _get_regs(tid)
    regs = _Regs.from_buffer_copy(saved)
    regs.rip, regs.rax, regs.orig_rax = base + at, 9, 2**64 - 1  # orig_rax -1: no restart
    regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9 = 0, _PAGE, 5, 0x22, 2**64 - 1, 0
    _set_regs(tid, regs)
    try:
        stopped.step(tid, base + at + 2)
        result = _get_regs(tid).rax
    finally:
        _set_regs(tid, saved)
    if result >= 2**64 - 4095:
        raise NemesisError(f"mmap in process {stopped.pid} failed: "
                           f"{os.strerror(2**64 - result)}")
    return result


# --- public API ------------------------------------------------------------------------------
def set_offset(pid: int, offset_s: float, *, monotonic: bool = False) -> None:
    """Make the wall clock of process `pid` read `offset_s` seconds ahead (negative: behind)
    of the host's, in every thread, from now on; with monotonic=True the monotonic and
    boottime clocks too. The first call stops the process for a few milliseconds (etcd under
    load: 2-10 ms) to inject; later calls only rewrite the offset (no stop). Offset 0 restores true time.
    Raises NemesisError (one sentence) when it cannot."""
    if not isinstance(offset_s, (int, float)) or offset_s != offset_s or abs(offset_s) > 2**62 / 1e9:
        raise NemesisError(f"clock offset {offset_s!r} is not a usable number of seconds")
    reason = _platform_reason()
    if reason:
        raise NemesisError(reason)
    with _lock:
        try:
            page = _page_of(pid)
            if page is None:
                _inject(pid, offset_s, monotonic)
            else:
                _update(pid, page, offset_s, monotonic)
        except _Gone:
            raise NemesisError(f"process {pid} exited while its clock was being shifted") from None
        except OSError as e:
            raise NemesisError(f"cannot shift the clock of process {pid}: {e.strerror or e}") from None


def get_offset(pid: int) -> float | None:
    """The offset last set on `pid` in seconds, read back from the process itself; None if
    its clock was never shifted (or it is not running)."""
    try:
        page = _page_of(pid)
        if page is None:
            return None
        active = _read(pid, page + _ACTIVE, 1)[0] & 1
        _, ns = struct.unpack("<Qq", _read(pid, page + _SLOT[active], 16))
        return ns / 1e9
    except (NemesisError, OSError):
        return None


def _platform_reason() -> str | None:
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return f"clock shifting by vDSO patching needs Linux on x86_64, not {sys.platform}/{platform.machine()}"
    try:
        scope = int(open("/proc/sys/kernel/yama/ptrace_scope").read())
    except (OSError, ValueError):
        scope = 0
    if scope >= 3:
        return "ptrace is disabled on this machine (kernel.yama.ptrace_scope=3), so clocks cannot be shifted"
    if scope == 2 and os.geteuid() != 0:
        return "kernel.yama.ptrace_scope=2 allows ptrace only to root; run as root to shift clocks"
    return None


_probe: list[str | None] = []


def supported() -> str | None:
    """None if set_offset works here, else one sentence why not. The first call proves it on
    a throwaway child process (patch, read back, clock really shifted) and caches the answer."""
    reason = _platform_reason()
    if reason or _probe:
        return reason or _probe[0]
    code = "import sys, time\nprint('ready', flush=True)\nfor line in sys.stdin:\n    print(time.time(), flush=True)\n"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, process_group=0)
    try:
        # Patch only once the child runs Python: before (or during) its exec it has no vDSO
        # of its own yet, which made this probe fail now and then on a loaded host.
        child.stdout.readline()
        set_offset(child.pid, 1000.0)
        child.stdin.write("x\n")
        child.stdin.flush()
        seen = float(child.stdout.readline())
        if get_offset(child.pid) != 1000.0 or abs(seen - time.time() - 1000.0) > 5:
            result = "vDSO patching had no effect on a test process on this machine"
        else:
            result = None
    except (NemesisError, ValueError) as e:
        result = f"vDSO patching does not work here: {e}"
    finally:
        child.kill()
        child.wait()
    _probe.append(result)
    return result
