"""envsim worker: runs environment code for the Rust executor.

One process serves one request at a time over JSON lines (stdin -> stdout). Standard library
only. The Rust side owns the process: it sets its resource limits (prlimit) and re-arms the CPU
limit before each request, applies the wall-clock timeout, kills and replaces a worker that hangs,
crashes or exceeds its limits, and never trusts what comes back. Before reading the first request
this process confines itself (see "Sandbox" below); a worker that cannot install its seccomp
filter exits with status 70 instead of serving.

Requests (one JSON object per line, answered by one line with the same "id"):
  {"op": "hello"}                                  -> interpreter and sandbox facts
  {"op": "construct", "env", "seed", "clock"} + a line with the state
                                                   -> {"state": the constructed instance's state}
  {"op": "load", "env": K, "code": S, "class_name": C, "convention": "class" | "database"}
  {"op": "describe", "env": K}                     -> the tools and their signatures
  {"op": "code_map", "env": K}                     -> the environment's executable lines,
                                                      branch arcs and the numbers its functions
                                                      compare their parameters with (see
                                                      "Coverage" below)
  {"op": "call", "env": K, "tool": T, "args": {...},
   "seed": int, "clock": float, "alias_init_config": bool, "trace": bool, "coverage": bool}
  followed by one line holding the state JSON; with "coverage" the reply (a success or not)
  carries "coverage": {"lines": [...], "arcs": [[from, to], ...]}

Conventions (the manifest's "convention"; "class" when absent):
  class     the code defines a class; a call constructs it from the state EnvScaler-style and
            calls the public method; the state is the instance's public attributes.
  database  the tools are the module's public functions (defined in the code itself, not
            imported); a call decodes the state into one dict, the database, and calls
            `tool(database, **args)`; the state after is that dict as the function left it
            (mutated in place). "class_name" is ignored.

Every reply is {"id", "ok": true, ...} or {"id", "ok": false, "error": {"kind", "message"}}.
Error kinds: load_error, invalid_call, exception, memory, output_too_large, bad_request.
"""

import ast
import builtins
import copy
import datetime as _datetime
import dis
import inspect
import io
import json
import os
import random
import resource
import shutil
import struct
import sys
import time
import traceback
import types
import uuid

_REAL = {
    "time": time.time,
    "time_ns": time.time_ns,
    "localtime": time.localtime,
    "gmtime": time.gmtime,
    "strftime": time.strftime,
    "ctime": time.ctime,
    "datetime": _datetime.datetime,
    "date": _datetime.date,
    "uuid1": uuid.uuid1,
    "uuid4": uuid.uuid4,
}

OUTPUT_CAP = int(os.environ.get("ENVSIM_OUTPUT_CAP", str(16 * 1024 * 1024)))
CPU_SECONDS = int(os.environ.get("ENVSIM_CPU_SECONDS", "10"))

# --------------------------------------------------------------------------------------------
# Determinism: one frozen clock and one seeded generator per call.

_CLOCK = [1735689600.0]  # 2025-01-01T00:00:00Z until a call sets it
_RNG = random.Random(0)


def _now():
    return _CLOCK[0]


class FrozenDateTime(_REAL["datetime"]):
    """datetime whose now/utcnow/today read the call's frozen clock."""

    @classmethod
    def now(cls, tz=None):
        return cls.fromtimestamp(_now(), tz)

    @classmethod
    def utcnow(cls):
        return cls.utcfromtimestamp(_now())

    @classmethod
    def today(cls):
        return cls.fromtimestamp(_now())


class FrozenDate(_REAL["date"]):
    """date whose today() reads the call's frozen clock."""

    @classmethod
    def today(cls):
        return cls.fromtimestamp(_now())


def _uuid4():
    return uuid.UUID(bytes=bytes(_RNG.getrandbits(8) for _ in range(16)), version=4)


def _uuid1(node=None, clock_seq=None):
    return uuid.UUID(bytes=bytes(_RNG.getrandbits(8) for _ in range(16)), version=1)


def _install_determinism():
    time.time = _now
    time.time_ns = lambda: int(_now() * 1_000_000_000)
    time.localtime = lambda secs=None: _REAL["localtime"](_now() if secs is None else secs)
    time.gmtime = lambda secs=None: _REAL["gmtime"](_now() if secs is None else secs)
    time.ctime = lambda secs=None: _REAL["ctime"](_now() if secs is None else secs)
    time.strftime = lambda fmt, t=None: _REAL["strftime"](fmt, time.localtime() if t is None else t)
    _datetime.datetime = FrozenDateTime
    _datetime.date = FrozenDate
    uuid.uuid4 = _uuid4
    uuid.uuid1 = _uuid1
    # Module-level random functions are bound methods of a hidden instance; reseeding that
    # instance per call makes `random.choice(...)` and friends reproducible.
    for name in ("random", "randint", "choice", "choices", "shuffle", "sample", "uniform",
                 "randrange", "getrandbits", "gauss"):
        setattr(random, name, getattr(_RNG, name))


# --------------------------------------------------------------------------------------------
# Sandbox. Installed once at start-up, before the first request is read, so environment code
# never runs outside it. Layers (each reported by `hello`, see docs/executor.md):
#   - no_new_privs;
#   - a private user and network namespace when the kernel allows one (no network interfaces);
#   - Landlock: reads only the Python installation, system libraries and a few files CPython
#     needs, writes only the working directory; signals and abstract UNIX sockets scoped to
#     this process (Landlock ABI 6+), no TCP (ABI 4+). Without Landlock: a private root built in
#     a mount namespace (see `_private_root`), or nothing, and `hello` says so;
#   - a seccomp allow-list (x86-64): everything this process needs, nothing that starts
#     processes, opens sockets, changes limits, mounts, traces or signals other processes.
# Resource limits are set from outside: the executor applies them with prlimit(2) after the
# start and re-arms the CPU limit before each request; this process cannot change any of them.

PR_SET_NO_NEW_PRIVS = 38
AUDIT_ARCH_X86_64 = 0xC000003E
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000

# x86_64 syscalls allowed whatever their arguments. Measured with strace on the corpus's
# scripted tests (read, write, openat, close, newfstatat, getdents64, lseek, chdir, brk, mmap,
# munmap, ioctl) and on a smoke test of the standard library (threads, thread pools, sleeping,
# tempfile, file work, hashlib, os.urandom, zoneinfo, sqlite3 in memory, asyncio, logging),
# plus the rest of those families (the *at and vectored variants). Path-based calls are confined
# by Landlock; the socket calls act only on socketpair(AF_UNIX) sockets, as socket(2) is refused.
# Refused (EPERM) among others: socket, connect, bind, fork, vfork, execve, execveat, wait4,
# ptrace, process_vm_*, kill/tgkill to others, setrlimit, prlimit64 setting a limit, mount,
# umount2, pivot_root, chroot, unshare, setns, chmod/fchmodat/chown*/utime* (by path: not
# confined by Landlock), truncate (by path), mknod, setxattr, io_uring_*, bpf, perf_event_open,
# userfaultfd, keyctl, add_key, seccomp, landlock_*, pidfd_*, memfd_create, personality, set*id.
_ALLOWED_SYSCALLS = {
    "read": 0, "write": 1, "open": 2, "close": 3, "stat": 4, "fstat": 5, "lstat": 6, "poll": 7,
    "lseek": 8, "mmap": 9, "mprotect": 10, "munmap": 11, "brk": 12, "rt_sigprocmask": 14,
    "rt_sigreturn": 15, "pread64": 17, "pwrite64": 18, "readv": 19, "writev": 20, "access": 21,
    "pipe": 22, "select": 23, "sched_yield": 24, "mremap": 25, "msync": 26, "mincore": 27,
    "madvise": 28, "dup": 32, "dup2": 33, "pause": 34, "nanosleep": 35, "getitimer": 36,
    "alarm": 37, "setitimer": 38, "getpid": 39, "sendfile": 40, "sendto": 44, "recvfrom": 45,
    "sendmsg": 46, "recvmsg": 47, "shutdown": 48, "getsockname": 51, "getpeername": 52,
    "setsockopt": 54, "getsockopt": 55, "exit": 60, "uname": 63,
    "flock": 73, "fsync": 74, "fdatasync": 75, "ftruncate": 77, "getdents": 78,
    "getcwd": 79, "chdir": 80, "fchdir": 81, "rename": 82, "mkdir": 83, "rmdir": 84, "creat": 85,
    "link": 86, "unlink": 87, "symlink": 88, "readlink": 89, "fchmod": 91, "umask": 95,
    "gettimeofday": 96, "getrlimit": 97, "getrusage": 98, "sysinfo": 99, "times": 100,
    "getuid": 102, "getgid": 104, "geteuid": 107, "getegid": 108, "getppid": 110, "getpgrp": 111,
    "getgroups": 115, "getresuid": 118, "getresgid": 120, "rt_sigpending": 127,
    "rt_sigtimedwait": 128, "rt_sigsuspend": 130, "sigaltstack": 131, "statfs": 137,
    "fstatfs": 138, "arch_prctl": 158, "gettid": 186, "time": 201, "futex": 202,
    "epoll_create": 213, "getdents64": 217, "set_tid_address": 218, "restart_syscall": 219,
    "fadvise64": 221, "clock_gettime": 228, "clock_getres": 229, "clock_nanosleep": 230,
    "exit_group": 231, "epoll_wait": 232, "epoll_ctl": 233, "openat": 257, "mkdirat": 258,
    "newfstatat": 262, "unlinkat": 263, "renameat": 264, "linkat": 265, "symlinkat": 266,
    "readlinkat": 267, "faccessat": 269, "pselect6": 270, "ppoll": 271, "set_robust_list": 273,
    "splice": 275, "tee": 276, "epoll_pwait": 281, "signalfd": 282, "timerfd_create": 283,
    "eventfd": 284, "timerfd_settime": 286, "timerfd_gettime": 287, "signalfd4": 289,
    "eventfd2": 290, "epoll_create1": 291, "dup3": 292, "pipe2": 293, "preadv": 295,
    "pwritev": 296, "getcpu": 309, "renameat2": 316, "getrandom": 318, "membarrier": 324,
    "copy_file_range": 326, "preadv2": 327, "pwritev2": 328, "statx": 332, "rseq": 334,
    "close_range": 436, "faccessat2": 439, "epoll_pwait2": 441,
}
# Allowed only with the arguments checked in `_seccomp_program`.
_SYS_RT_SIGACTION, _SYS_IOCTL, _SYS_CLONE, _SYS_KILL = 13, 16, 56, 62
_SYS_PRCTL, _SYS_SCHED_GETAFFINITY, _SYS_TGKILL, _SYS_PRLIMIT64, _SYS_CLONE3 = 157, 204, 234, 302, 435
_SIGXCPU = 24
_CLONE_THREAD = 0x00010000
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
# TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIONCLEX, FIOCLEX: what isatty, os.set_inheritable and
# friends use.
_IOCTLS = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)
_PRCTLS = (15, 16, 23)  # PR_SET_NAME, PR_GET_NAME, PR_CAPBSET_READ
_SYS_SOCKETPAIR, _AF_UNIX = 53, 1
# fcntl commands that make the kernel signal a chosen process (SIGIO or any signal set with
# F_SETSIG when the file is ready, lease and directory notifications): refused, so that no
# signal reaches another process even where Landlock cannot scope signals (ABI < 6).
_SYS_FCNTL = 72
_FCNTL_SIGNALLING = (8, 10, 15, 1024, 1026)  # F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE, F_NOTIFY


def _bpf_assemble(items):
    """Classic BPF from (code, jt, jf, k) tuples; jt/jf are relative offsets or label names."""
    labels, real = {}, []
    for item in items:
        if isinstance(item, str):
            labels[item] = len(real)
        else:
            real.append(item)
    out = []
    for i, (code, jt, jf, k) in enumerate(real):
        offsets = []
        for target in (jt, jf):
            offset = labels[target] - i - 1 if isinstance(target, str) else target
            if not 0 <= offset <= 255:
                raise ValueError("BPF jump out of range")
            offsets.append(offset)
        out.append(struct.pack("HBBI", code, offsets[0], offsets[1], k))
    return b"".join(out)


def _seccomp_program(pid):
    """The allow-list: KILL for a foreign architecture, EPERM for the x32 ABI, ENOSYS for clone3
    (glibc falls back to clone, whose flags can be checked), ALLOW for `_ALLOWED_SYSCALLS`, the
    argument checks below, EPERM for everything else."""
    LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
    ALLOW, KILL_PROCESS = 0x7FFF0000, 0x80000000
    EPERM, ENOSYS = 0x00050000 | 1, 0x00050000 | 38
    ARG0, ARG1, ARG2 = 16, 24, 32  # low words; the high word is 4 bytes further

    def ld(offset):
        return (LD, 0, 0, offset)

    def ret(value):
        return (RET, 0, 0, value)

    def syscall_is(nr, end):
        return (JEQ, 0, end, nr)

    def arg_in(values, yes, no):
        out = []
        for n, value in enumerate(values):
            last = n == len(values) - 1
            out.append((JEQ, yes, no if last else 0, value))
        return out

    prog = [
        ld(4), (JEQ, 1, 0, AUDIT_ARCH_X86_64), ret(KILL_PROCESS),
        ld(0), (JSET, 0, 1, 0x40000000), ret(EPERM),
        (JEQ, 0, 1, _SYS_CLONE3), ret(ENOSYS),
    ]
    for nr in sorted(_ALLOWED_SYSCALLS.values()):
        prog += [(JEQ, 0, 1, nr), ret(ALLOW)]
    # threads only: CLONE_THREAD set, no namespace flags
    prog += [syscall_is(_SYS_CLONE, "clone_end"), ld(ARG0), (JSET, 1, 0, _CLONE_THREAD), ret(EPERM),
             (JSET, 0, 1, _CLONE_NAMESPACES), ret(EPERM), ret(ALLOW), "clone_end"]
    # signals to this process (kill) or its own threads (tgkill) only
    for nr in (_SYS_KILL, _SYS_TGKILL):
        end = "signal_end_%d" % nr
        prog += [syscall_is(nr, end), ld(ARG0), (JEQ, 0, 1, pid), ret(ALLOW), ret(EPERM), end]
    # a connected pair of UNIX sockets (asyncio's self-pipe) reaches nothing outside; socket(2)
    # itself is refused for every family, as connecting to a named UNIX socket is not confined
    prog += [syscall_is(_SYS_SOCKETPAIR, "socketpair_end"), ld(ARG0), (JEQ, 0, 1, _AF_UNIX), ret(ALLOW),
             ret(EPERM), "socketpair_end"]
    prog += [syscall_is(_SYS_FCNTL, "fcntl_end"), ld(ARG1)]
    prog += arg_in(_FCNTL_SIGNALLING, "fcntl_no", "fcntl_yes")
    prog += ["fcntl_yes", ret(ALLOW), "fcntl_no", ret(EPERM), "fcntl_end"]
    # this process's own CPU affinity
    prog += [syscall_is(_SYS_SCHED_GETAFFINITY, "affinity_end"), ld(ARG0)]
    prog += arg_in((0, pid), "affinity_yes", "affinity_no")
    prog += ["affinity_yes", ret(ALLOW), "affinity_no", ret(EPERM), "affinity_end"]
    # reading limits, never setting them: prlimit64(0 or self, resource, NULL, old)
    prog += [syscall_is(_SYS_PRLIMIT64, "prlimit_end"), ld(ARG0)]
    prog += arg_in((0, pid), "prlimit_self", "prlimit_no")
    prog += ["prlimit_self", ld(ARG2), (JEQ, 0, "prlimit_no", 0), ld(ARG2 + 4),
             (JEQ, 0, "prlimit_no", 0), ret(ALLOW), "prlimit_no", ret(EPERM), "prlimit_end"]
    # no handler for SIGXCPU (the CPU limit must stay fatal); reading it is fine
    prog += [syscall_is(_SYS_RT_SIGACTION, "sigaction_end"), ld(ARG0), (JEQ, 1, 0, _SIGXCPU), ret(ALLOW),
             ld(ARG1), (JEQ, 0, "sigaction_no", 0), ld(ARG1 + 4), (JEQ, 0, "sigaction_no", 0),
             ret(ALLOW), "sigaction_no", ret(EPERM), "sigaction_end"]
    # harmless ioctl and prctl requests only
    prog += [syscall_is(_SYS_IOCTL, "ioctl_end"), ld(ARG1)]
    prog += arg_in(_IOCTLS, "ioctl_yes", "ioctl_no")
    prog += ["ioctl_yes", ret(ALLOW), "ioctl_no", ret(EPERM), "ioctl_end"]
    prog += [syscall_is(_SYS_PRCTL, "prctl_end"), ld(ARG0)]
    prog += arg_in(_PRCTLS, "prctl_yes", "prctl_no")
    prog += ["prctl_yes", ret(ALLOW), "prctl_no", ret(EPERM), "prctl_end"]
    prog.append(ret(EPERM))
    return _bpf_assemble(prog)


def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return ctypes, libc


def _errno_text(ctypes):
    err = ctypes.get_errno()
    return "%s (errno %d)" % (os.strerror(err), err)


def _install_seccomp(ctypes, libc):
    program = _seccomp_program(os.getpid())
    buf = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    # seccomp(SECCOMP_SET_MODE_FILTER, 0, &prog) is syscall 317 on x86_64
    if libc.syscall(ctypes.c_long(317), ctypes.c_uint(1), ctypes.c_uint(0), ctypes.byref(fprog)) != 0:
        raise OSError("seccomp: " + _errno_text(ctypes))
    return "on: allow-list of %d syscalls (+10 with checked arguments), x32 refused, other ABIs killed" % len(_ALLOWED_SYSCALLS)


def _unshare(ctypes, libc):
    """Private user (uid and gid mapped to themselves), network and mount namespaces; without a
    user namespace (not allowed here), network and mount namespaces if the process may create
    them (root). Returns (user namespace status, network status, whether the mount namespace is
    private). Nothing is mounted here: the mount namespace only serves `_private_root`."""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(ctypes.c_int(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS)) == 0:
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", "%d %d 1" % (uid, uid)), ("gid_map", "%d %d 1" % (gid, gid))):
                with open("/proc/self/" + name, "w") as f:
                    f.write(text)
        except OSError as exc:
            return "private (ids unmapped: %s)" % exc, "empty network namespace", True
        return "private", "empty network namespace", True
    why = _errno_text(ctypes)
    if libc.unshare(ctypes.c_int(CLONE_NEWNET | CLONE_NEWNS)) == 0:
        return "unavailable: %s" % why, "empty network namespace", True
    return "unavailable: %s" % why, "shared network namespace (unshare: %s)" % _errno_text(ctypes), False


# Landlock (include/uapi/linux/landlock.h)
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_LL_REMOVE_DIR, _LL_REMOVE_FILE, _LL_MAKE_CHAR, _LL_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
_LL_MAKE_REG, _LL_MAKE_SOCK, _LL_MAKE_FIFO, _LL_MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
_LL_MAKE_SYM, _LL_REFER, _LL_TRUNCATE, _LL_IOCTL_DEV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
_LL_FILE_ONLY = _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | _LL_TRUNCATE | _LL_IOCTL_DEV
_LL_READ = _LL_READ_FILE | _LL_READ_DIR
_LL_WORKDIR = (_LL_WRITE_FILE | _LL_READ_FILE | _LL_READ_DIR | _LL_REMOVE_DIR | _LL_REMOVE_FILE
               | _LL_MAKE_DIR | _LL_MAKE_REG | _LL_MAKE_SYM | _LL_MAKE_FIFO | _LL_REFER | _LL_TRUNCATE)


def _landlock_abi(ctypes, libc):
    """The kernel's Landlock ABI version, or None and why not."""
    abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint(1))
    if abi < 0:
        return None, _errno_text(ctypes)
    return abi, None


def _readable_paths():
    """What CPython needs to read after start-up: its installation (every sys.path entry and
    each prefix's lib directories), the system libraries, the directories of the shared objects
    already loaded, time-zone data, the dynamic loader's cache, random and null devices, and
    this runner."""
    # A sys.path entry (a .pth file can add any) as broad as "/" or "/home" is not taken.
    paths = {p for p in sys.path if p and os.path.abspath(p).count("/") >= 2}
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        paths.update(os.path.join(prefix, sub) for sub in ("lib", "lib64"))
    paths.update(("/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64",
                  "/usr/local/lib", "/usr/share/zoneinfo", "/etc/localtime", "/etc/ld.so.cache",
                  "/dev/urandom", "/dev/random", "/dev/zero", os.path.abspath(__file__)))
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6 and fields[5].startswith("/") and ".so" in fields[5]:
                    paths.add(os.path.dirname(fields[5].strip()))
    except OSError:
        pass
    return paths


def _install_landlock(ctypes, libc, abi, workdir):
    fs = (1 << 13) - 1
    if abi >= 2:
        fs |= _LL_REFER
    if abi >= 3:
        fs |= _LL_TRUNCATE
    if abi >= 5:
        fs |= _LL_IOCTL_DEV
    net = 0b11 if abi >= 4 else 0      # BIND_TCP | CONNECT_TCP, with no port allowed
    scoped = 0b11 if abi >= 6 else 0   # ABSTRACT_UNIX_SOCKET | SIGNAL
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    attr = ctypes.create_string_buffer(struct.pack("QQQ", fs, net, scoped), 24)
    ruleset = libc.syscall(ctypes.c_long(444), attr, ctypes.c_size_t(size), ctypes.c_uint(0))
    if ruleset < 0:
        raise OSError("landlock_create_ruleset: " + _errno_text(ctypes))
    rules = [(p, _LL_READ) for p in _readable_paths()]
    rules.append(("/dev/null", _LL_READ_FILE | _LL_WRITE_FILE))
    if workdir is not None:
        rules.append((workdir, _LL_WORKDIR))
    added = 0
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                import stat as _stat

                if not _stat.S_ISDIR(os.fstat(fd).st_mode):
                    access &= _LL_FILE_ONLY
                rule = ctypes.create_string_buffer(struct.pack("=Qi", access & fs, fd), 12)
                if libc.syscall(ctypes.c_long(445), ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint(0)) != 0:
                    raise OSError("landlock_add_rule(%s): %s" % (path, _errno_text(ctypes)))
                added += 1
            finally:
                os.close(fd)
        flags = 1 if abi >= 7 else 0  # LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF: no audit spam
        if libc.syscall(ctypes.c_long(446), ctypes.c_int(ruleset), ctypes.c_uint(flags)) != 0:
            raise OSError("landlock_restrict_self: " + _errno_text(ctypes))
    finally:
        os.close(ruleset)
    return added


def _install_sandbox(workdir):
    """Installs every layer; returns the facts `hello` reports. A failure to install the seccomp
    filter on x86-64 is fatal (the worker exits and the executor reports a crash); the other
    layers degrade and say so."""
    if not sys.platform.startswith("linux"):
        return {"platform": "unsandboxed: the sandbox is Linux-only (%s)" % sys.platform}
    facts = {}
    ctypes, libc = _libc()
    if libc.prctl(ctypes.c_int(PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        raise OSError("no_new_privs: " + _errno_text(ctypes))
    facts["no_new_privs"] = True
    facts["user_namespace"], facts["network"], mount_namespace = _unshare(ctypes, libc)
    abi, why = _landlock_abi(ctypes, libc)
    if abi is not None and os.environ.get("ENVSIM_SANDBOX_NO_LANDLOCK") == "1":
        abi, why = None, "disabled by ENVSIM_SANDBOX_NO_LANDLOCK"
    if abi is not None:
        try:
            rules = _install_landlock(ctypes, libc, abi, workdir)
        except OSError as exc:  # nothing is enforced before landlock_restrict_self succeeds
            abi, why = None, "ABI %d, but %s" % (abi, exc)
    if abi is not None:
        facts["landlock"] = "ABI %d" % abi
        facts["filesystem"] = ("landlock (%d rules): reads only the Python installation, system "
                               "libraries, time-zone data and this runner; writes only the working "
                               "directory" % rules)
    else:
        facts["landlock"] = "unavailable: %s" % why
        facts["filesystem"] = _private_root(ctypes, libc, workdir, mount_namespace)
    if os.uname().machine == "x86_64":
        facts["seccomp"] = _install_seccomp(ctypes, libc)
        facts["network"] += "; no sockets but socketpair(AF_UNIX) (seccomp)"
    else:
        facts["seccomp"] = "unavailable: the filter is written for x86_64, not %s" % os.uname().machine
    return facts


def _limits_facts():
    def soft(res):
        value = resource.getrlimit(res)[0]
        return None if value == resource.RLIM_INFINITY else value

    def hard(res):
        value = resource.getrlimit(res)[1]
        return None if value == resource.RLIM_INFINITY else value

    return {
        "memory_bytes": soft(resource.RLIMIT_AS),
        "cpu_seconds_per_call": CPU_SECONDS,
        "file_size_bytes": soft(resource.RLIMIT_FSIZE),
        "open_files": soft(resource.RLIMIT_NOFILE),
        "core_bytes": soft(resource.RLIMIT_CORE),
        "cpu_seconds_lifetime": hard(resource.RLIMIT_CPU),
    }


_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21


def _private_root(ctypes, libc, workdir, mount_namespace):
    """The confinement without Landlock: in the private mount namespace, a new root (a tmpfs)
    that holds read-only bind mounts of what `_readable_paths` lists and the working directory
    read-write, and a chroot into it. Nothing else exists there, so nothing else can be read or
    written; the seccomp filter then forbids mount, chroot, unshare and setns."""
    if not mount_namespace:
        return "none: no Landlock and no mount namespace; the code can read and write what the user can"
    mount = libc.mount
    mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

    def do_mount(source, target, fstype, flags, data=None):
        enc = lambda s: None if s is None else os.fsencode(s)
        if mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
            raise OSError("mount %s: %s" % (target, _errno_text(ctypes)))

    def read_only(target):
        # Remounting must keep the flags the mount was locked with.
        flags = os.statvfs(target).f_flag
        locked = 0
        for st, ms in ((os.ST_NOSUID, _MS_NOSUID), (os.ST_NODEV, _MS_NODEV), (os.ST_NOEXEC, _MS_NOEXEC),
                       (os.ST_NOATIME, _MS_NOATIME), (os.ST_NODIRATIME, _MS_NODIRATIME), (os.ST_RELATIME, _MS_RELATIME)):
            if flags & st:
                locked |= ms
        do_mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | locked)

    # The paths to keep (symbolic links are recreated and their targets kept), outermost first,
    # each once: a path beneath a kept directory comes with it.
    links, real = [], set()
    for path in {os.path.normpath(p) for p in _readable_paths() | {"/dev/null"}}:
        if not os.path.exists(path):
            continue
        if os.path.islink(path):
            links.append((path, os.readlink(path)))
        real.add(os.path.realpath(path))
    binds = []
    for path in sorted(real):
        if not any(path == kept or path.startswith(kept.rstrip("/") + "/") for kept, _ in binds):
            binds.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC)))
    work_fd = os.open(workdir, os.O_PATH | os.O_CLOEXEC) if workdir else None
    base = workdir or "/tmp"
    try:
        do_mount(None, "/", None, _MS_REC | _MS_PRIVATE)
        do_mount("tmpfs", base, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1m,mode=0755")
        for path, fd in binds:
            target = base + path
            if os.path.isdir("/proc/self/fd/%d" % fd):
                os.makedirs(target, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                open(target, "a").close()
            do_mount("/proc/self/fd/%d" % fd, target, None, _MS_BIND)
            read_only(target)
        for path, destination in links:
            if not os.path.lexists(base + path):
                os.makedirs(os.path.dirname(base + path), exist_ok=True)
                os.symlink(destination, base + path)
        if work_fd is not None:
            os.makedirs(base + workdir, exist_ok=True)
            do_mount("/proc/self/fd/%d" % work_fd, base + workdir, None, _MS_BIND)
        read_only(base)
        os.chdir(base)
        if libc.chroot(b".") != 0:
            raise OSError("chroot: " + _errno_text(ctypes))
        os.chdir(workdir or "/")
    finally:
        for _, fd in binds:
            os.close(fd)
        if work_fd is not None:
            os.close(work_fd)
    return ("private root (mount namespace + chroot): %d read-only bind mounts of the Python "
            "installation, system libraries and this runner, the working directory read-write; "
            "nothing else exists" % len(binds))


# --------------------------------------------------------------------------------------------
# JSON conversion of Python values, with a report of everything that was not plain JSON.

def _to_json(value, path, converted, depth=0):
    if depth > 200:
        raise ValueError("value nested deeper than 200 levels at %s" % (path or "/"))
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            converted.append({"path": path, "from": "float", "to": "string"})
            return repr(value)
        return value
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(key, str):
                name = key
            else:
                name = str(key)
                converted.append({"path": path + "/" + _escape(name), "from": "key:" + type(key).__name__, "to": "string key"})
            out[name] = _to_json(item, path + "/" + _escape(name), converted, depth + 1)
        return out
    if isinstance(value, list):
        return [_to_json(item, "%s/%d" % (path, i), converted, depth + 1) for i, item in enumerate(value)]
    if isinstance(value, tuple):
        converted.append({"path": path, "from": "tuple", "to": "list"})
        return [_to_json(item, "%s/%d" % (path, i), converted, depth + 1) for i, item in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        converted.append({"path": path, "from": type(value).__name__, "to": "sorted list"})
        try:
            items = sorted(value)
        except TypeError:
            items = sorted(value, key=repr)
        return [_to_json(item, "%s/%d" % (path, i), converted, depth + 1) for i, item in enumerate(items)]
    if isinstance(value, (_REAL["datetime"], _REAL["date"])):
        converted.append({"path": path, "from": type(value).__name__, "to": "isoformat string"})
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        converted.append({"path": path, "from": "UUID", "to": "string"})
        return str(value)
    if isinstance(value, bytes):
        converted.append({"path": path, "from": "bytes", "to": "string"})
        return value.decode("utf-8", "replace")
    if hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType, types.FunctionType)):
        converted.append({"path": path, "from": type(value).__name__, "to": "object of public attributes"})
        public = {k: v for k, v in vars(value).items() if not k.startswith("_")}
        return _to_json(public, path, converted, depth + 1)
    converted.append({"path": path, "from": type(value).__name__, "to": "repr string"})
    return repr(value)


def _escape(token):
    return token.replace("~", "~0").replace("/", "~1")


# --------------------------------------------------------------------------------------------
# Footprint tracing: containers that record which paths were read.

class _Reads:
    def __init__(self):
        self.paths = set()


class TracedDict(dict):
    __slots__ = ("_path", "_reads")

    def _child(self, key, value):
        return _wrap(value, self._path + "/" + _escape(str(key)), self._reads)

    def __getitem__(self, key):
        self._reads.paths.add(self._path + "/" + _escape(str(key)))
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        self._reads.paths.add(self._path + "/" + _escape(str(key)))
        return dict.get(self, key, default)

    def __contains__(self, key):
        self._reads.paths.add(self._path + "/" + _escape(str(key)))
        return dict.__contains__(self, key)

    def __iter__(self):
        self._reads.paths.add(self._path)
        return dict.__iter__(self)

    def keys(self):
        self._reads.paths.add(self._path)
        return dict.keys(self)

    def values(self):
        self._reads.paths.add(self._path)
        return dict.values(self)

    def items(self):
        self._reads.paths.add(self._path)
        return dict.items(self)

    def __len__(self):
        self._reads.paths.add(self._path)
        return dict.__len__(self)


class TracedList(list):
    __slots__ = ("_path", "_reads")

    def __getitem__(self, index):
        self._reads.paths.add(self._path)
        return list.__getitem__(self, index)

    def __iter__(self):
        self._reads.paths.add(self._path)
        return list.__iter__(self)

    def __len__(self):
        self._reads.paths.add(self._path)
        return list.__len__(self)


def _wrap(value, path, reads):
    if isinstance(value, dict):
        out = TracedDict()
        for k, v in value.items():
            dict.__setitem__(out, k, _wrap(v, path + "/" + _escape(str(k)), reads))
        out._path, out._reads = path, reads
        return out
    if isinstance(value, list):
        out = TracedList(_wrap(v, "%s/%d" % (path, i), reads) for i, v in enumerate(value))
        out._path, out._reads = path, reads
        return out
    return value


def _unwrap(value):
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [_unwrap(v) for v in list.__iter__(value)]
    return value


# --------------------------------------------------------------------------------------------
# Coverage: which lines and line arcs of the environment's own code a call ran.
#
# A branch is measured as coverage.py measures branches: by line arcs. Every conditional jump
# of the environment's functions (an `if`, a loop's test, a short-circuit, a comprehension's
# filter) leaves its line for one line when taken and another when not; those two arcs are the
# branch's outcomes, kept only when they reach two different lines (a conditional expression on
# one line has no outcome a line trace can tell apart). A call is traced with sys.settrace on
# every Python version, so that one definition of a branch holds everywhere; only the tool call
# itself is traced, never the construction of the instance (which a chained call skips), so the
# same call always reports the same coverage.

_SOURCES = {}  # env key -> (compiled module code, the class whose __init__ is the constructor,
#                the source text comparisons are read from)
_CODE_MAPS = {}  # env key -> _CodeMap
_COVERAGE = []  # the coverage of the call being answered, attached to its reply by main()

_UNCONDITIONAL_JUMPS = frozenset(("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_ABSOLUTE", "JUMP",
                                  "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_NO_INTERRUPT"))
_LEAVING = frozenset(("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"))
_PROLOGUE = frozenset(("RESUME", "MAKE_CELL", "COPY_FREE_VARS", "RETURN_GENERATOR", "CACHE",
                       "EXTENDED_ARG", "NOP", "GEN_START"))


def _instruction_lines(instructions):
    """The source line of every instruction (None where it has none)."""
    lines, current = [], None
    for ins in instructions:
        number = getattr(ins, "line_number", None)  # 3.13+
        if number is None and getattr(ins, "positions", None) is not None:  # 3.11, 3.12
            number = ins.positions.lineno
        elif number is None and isinstance(ins.starts_line, int) and not isinstance(ins.starts_line, bool):
            current = ins.starts_line  # before 3.11: the line an instruction starts, else the last
            number = current
        elif number is None and not hasattr(ins, "positions"):
            number = current
        lines.append(number)
    return lines


# Lines that open and close code a package carries that is not the environment's own (an
# importer's adapter, stand-ins for a framework): left out of the code map, so coverage and
# boundary probes speak of the environment's code alone. A region left open runs to the end.
_ADAPTER_BEGIN = "# envsim: adapter begin"
_ADAPTER_END = "# envsim: adapter end"


def _adapter_lines(text):
    """The 1-based numbers of the lines inside adapter regions (markers included)."""
    inside, out = False, set()
    for number, line in enumerate(text.split("\n"), 1):  # as the compiler counts lines
        marker = line.strip()
        if marker == _ADAPTER_BEGIN:
            inside = True
        if inside:
            out.add(number)
        if marker == _ADAPTER_END:
            inside = False
    return out


class _CodeMap:
    """The environment's functions (code objects of its own source that are functions, not the
    module body or class bodies, not the class's constructor, and not in an adapter region),
    their executable lines, their branch arcs and the numbers they compare their parameters
    with."""

    def __init__(self, module_code, class_name, text):
        self.codes = set()
        self.lines = set()
        self.branches = set()
        adapter = _adapter_lines(text)
        self.comparisons = _comparisons(text, adapter)
        pending = [(c, module_code) for c in module_code.co_consts]
        while pending:
            code, parent = pending.pop()
            if not isinstance(code, types.CodeType):
                continue
            if code.co_firstlineno in adapter:
                continue  # not the environment's own code, nor what it nests
            pending.extend((c, code) for c in code.co_consts)
            if not code.co_flags & inspect.CO_OPTIMIZED:
                continue  # a class body
            constructor = (code.co_name == "__init__" and parent.co_name == class_name
                           and not parent.co_flags & inspect.CO_OPTIMIZED)
            if constructor:
                continue  # runs before the call, outside the trace
            self.codes.add(code)
            self._read(code)

    def _read(self, code):
        instructions = list(dis.get_instructions(code))
        lines = _instruction_lines(instructions)
        at = {ins.offset: k for k, ins in enumerate(instructions)}
        for ins, line in zip(instructions, lines):
            if line is not None and ins.opname not in _PROLOGUE:
                self.lines.add(line)

        def reach(k, source):
            """The next line a trace shows after leaving `source` for instruction k."""
            for _ in range(64):
                if k is None or k >= len(instructions):
                    return None
                line = lines[k]
                if line is not None and line != source:
                    return line
                name = instructions[k].opname
                if name in _LEAVING:
                    return None
                k = at.get(instructions[k].argval) if name in _UNCONDITIONAL_JUMPS else k + 1
            return None

        for k, ins in enumerate(instructions):
            if lines[k] is None or not ("_IF_" in ins.opname or ins.opname.startswith("JUMP_IF")
                                        or ins.opname.startswith("POP_JUMP_IF") or ins.opname == "FOR_ITER"):
                continue
            taken = reach(at.get(ins.argval), lines[k])
            fallen = reach(k + 1, lines[k])
            if taken is not None and fallen is not None and taken != fallen:
                self.branches.add((lines[k], taken))
                self.branches.add((lines[k], fallen))


_TEXT_METHODS = frozenset(("strip", "lstrip", "rstrip", "lower", "upper", "casefold", "title"))
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_ORDERS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


def _compared_number(node):
    """The number a comparison operand is written as (`5`, `-1`, `31.5`), else None."""
    negative = isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
    if negative:
        node = node.operand
    if (isinstance(node, ast.Constant) and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)):
        return -node.value if negative else node.value
    return None


def _compared_parameter(node, parameters):
    """(parameter, whether its length is compared) for an operand that is a parameter
    (`weight`) or its length (`len(title)`, `len(title.strip())`), else None. `parameters` maps
    the names that stand for a parameter (the parameter itself, or a local made from it) to it."""
    if isinstance(node, ast.Name) and node.id in parameters:
        return parameters[node.id], False
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"
            and len(node.args) == 1 and not node.keywords):
        inner = _unwrapped_text(node.args[0])
        if isinstance(inner, ast.Name) and inner.id in parameters:
            return parameters[inner.id], True
    return None


def _unwrapped_text(node):
    """`title` for `title.strip().lower()`: what a chain of text methods is called on."""
    while (isinstance(node, ast.Call) and not node.args and not node.keywords
           and isinstance(node.func, ast.Attribute) and node.func.attr in _TEXT_METHODS):
        node = node.func.value
    return node


def _same_length_source(node):
    """The name a value of the same length is made from: `title` for `title.strip()`,
    `nameservers` for `[n.lower() for n in nameservers]`, `items` for `list(items)`."""
    node = _unwrapped_text(node)
    if isinstance(node, ast.Name):
        return node.id
    if (isinstance(node, ast.ListComp) and len(node.generators) == 1
            and not node.generators[0].ifs and isinstance(node.generators[0].iter, ast.Name)):
        return node.generators[0].iter.id
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("list", "tuple", "str") and len(node.args) == 1
            and isinstance(node.args[0], ast.Name)):
        return node.args[0].id
    return None


def _function_parameters(function):
    arguments = function.args
    return [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]


def _comparisons(text, adapter=frozenset()):
    """The numbers the functions of `text` compare their own parameters (or the parameters'
    lengths) with: [function, parameter, whether a length, operator, number], each once, in
    source order, read as `parameter operator number`. A local made from a parameter
    (`ns = [n.lower() for n in nameservers]`) stands for it, and a helper's comparison counts
    for the function that passes it a parameter (`_is_amount(amount)`). The places where a
    value one off changes the answer: what boundary probes aim at. Functions that start on a
    line of `adapter` (the lines of adapter regions) are left out."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    functions = [f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and f.lineno not in adapter]
    own = {}  # function name -> [(parameter, length, operator, number)] of its own comparisons
    for function in functions:
        parameters = {p: p for p in _function_parameters(function) if p != "self"}
        for node in ast.walk(function):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                source = _same_length_source(node.value)
                if source in parameters and node.targets[0].id not in parameters:
                    parameters[node.targets[0].id] = parameters[source]
        found = own.setdefault(function.name, [])
        for node in ast.walk(function):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left] + list(node.comparators)
            for k, op in enumerate(node.ops):
                name = _ORDERS.get(type(op))
                if name is None:
                    continue
                left, right = operands[k], operands[k + 1]
                compared, number = _compared_parameter(left, parameters), _compared_number(right)
                if compared is None:
                    # `5 <= len(title)` reads as `len(title) >= 5`.
                    compared, number = _compared_parameter(right, parameters), _compared_number(left)
                    name = _FLIPPED.get(name, name)
                if compared is not None and number is not None:
                    found.append((compared[0], compared[1], name, number))
    by_name = {f.name: f for f in functions}
    out, seen = [], set()

    def add(entry):
        if entry not in seen:
            seen.add(entry)
            out.append(list(entry))

    for function in functions:
        for entry in own.get(function.name, []):
            add((function.name,) + entry)
        parameters = set(_function_parameters(function)) - {"self"}
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else (
                node.func.id if isinstance(node.func, ast.Name) else None)
            helper = by_name.get(callee)
            if helper is None or helper is function or not own.get(helper.name):
                continue
            names = _function_parameters(helper)
            if names and names[0] == "self" and isinstance(node.func, ast.Attribute):
                names = names[1:]
            passed = {}
            for name, arg in zip(names, node.args):
                if isinstance(arg, ast.Name) and arg.id in parameters:
                    passed[name] = arg.id
            for keyword in node.keywords:
                if isinstance(keyword.value, ast.Name) and keyword.value.id in parameters:
                    passed[keyword.arg] = keyword.value.id
            for parameter, length, operator, number in own[helper.name]:
                if parameter in passed:
                    add((function.name, passed[parameter], length, operator, number))
    return out


def _code_map(key):
    found = _CODE_MAPS.get(key)
    if found is None and key in _SOURCES:
        found = _CODE_MAPS[key] = _CodeMap(*_SOURCES[key])
    return found


def _code_map_op(req):
    code_map = _code_map(req.get("env"))
    if code_map is None or req.get("env") not in _ENVS:
        return _fail("bad_request", "environment %r is not loaded" % req.get("env"))
    return {"ok": True, "lines": sorted(code_map.lines), "branches": sorted(code_map.branches),
            "comparisons": code_map.comparisons}


class _Coverage:
    """The lines and line arcs one call runs in the environment's functions."""

    def __init__(self, codes):
        self.codes = codes
        self.lines = set()
        self.arcs = set()

    def tracer(self, frame, event, arg):
        if frame.f_code not in self.codes:
            return None
        last = [None]
        lines, arcs = self.lines, self.arcs

        def local(frame, event, arg):
            if event == "line":
                line = frame.f_lineno
                lines.add(line)
                if last[0] is not None:
                    arcs.add((last[0], line))
                last[0] = line
            return local
        return local

    def reply(self):
        return {"lines": sorted(self.lines), "arcs": sorted(self.arcs)}


def _start_coverage(req):
    """A coverage record for the call when it asks for one (installed until `_stop_coverage`)."""
    del _COVERAGE[:]
    if not req.get("coverage"):
        return None
    code_map = _code_map(req.get("env"))
    if code_map is None:
        return None
    record = _Coverage(code_map.codes)
    _COVERAGE.append(record)
    sys.settrace(record.tracer)
    return record


def _stop_coverage(record):
    if record is not None:
        sys.settrace(None)


def _with_coverage(reply, coverage):
    """The reply (a success or a failure, assembled or not) with the call's coverage."""
    if isinstance(reply, _Raw):
        return _Raw(reply.body + ', "coverage": ' + json.dumps(coverage))
    reply["coverage"] = coverage
    return reply


# --------------------------------------------------------------------------------------------
# Environments and calls.

_ENVS = {}
# The private working directory the executor created for this worker. Only a directory handed
# over explicitly (ENVSIM_WORKDIR) and named like one of the executor's is ever emptied, so
# importing or running this file anywhere else can never delete files.
_WORKDIR = os.environ.get("ENVSIM_WORKDIR") or None
if _WORKDIR is not None and not os.path.basename(os.path.normpath(_WORKDIR)).startswith("envsim-worker-"):
    _WORKDIR = None


# --------------------------------------------------------------------------------------------
# Calls independent of the worker's history.
#
# A worker serves many calls; what one call leaves in the environment's module globals or class
# attributes (a counter kept on the class, a module-level cache) would reach the next call, so
# the same call on the same state would answer differently in a busy worker than in a fresh one
# (a benchmark sample would not replay from its stored state). Before every call they are put
# back as they were when the code was loaded — but for the names of envsim's own adapters
# (`_envsim…`, `_ENVSIM…`: the imports' caches, which check what they hold before using it).

_PRISTINE = {}  # env key -> _Pristine
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, tuple, frozenset, range)


def _adapters(name):
    return name.lower().startswith("_envsim")


def _is_data(value):
    """A plain value the code may change: not a function, class, module or descriptor."""
    return not (callable(value) or isinstance(value, (staticmethod, classmethod, property,
                                                      types.ModuleType, type)))


def _snapshot(value):
    """A copy to restore from (immutable values are their own), or None when it cannot be
    copied (such a value is left as it is)."""
    if isinstance(value, _IMMUTABLE):
        return (value,)
    try:
        return (copy.deepcopy(value),)
    except Exception:
        return None


def _same(a, b):
    try:
        return a is b or (type(a) is type(b) and bool(a == b))
    except Exception:
        return False


class _Pristine:
    """The data the environment's module and its classes held when the code was loaded."""

    def __init__(self, module):
        self.namespace = module.__dict__
        self.names = set(self.namespace)
        self.globals = {}
        self.classes = []
        for name, value in list(self.namespace.items()):
            if isinstance(value, type) and value.__module__ == module.__name__:
                attributes = {}
                for key, attribute in vars(value).items():
                    if not key.startswith("__") and not _adapters(key) and _is_data(attribute):
                        kept = _snapshot(attribute)
                        if kept is not None:
                            attributes[key] = kept[0]
                self.classes.append((value, attributes, set(vars(value))))
            elif not name.startswith("__") and not _adapters(name) and _is_data(value):
                kept = _snapshot(value)
                if kept is not None:
                    self.globals[name] = kept[0]

    @staticmethod
    def _restored(kept):
        return kept if isinstance(kept, _IMMUTABLE) else copy.deepcopy(kept)

    def restore(self):
        namespace = self.namespace
        for name, kept in self.globals.items():
            if not _same(namespace.get(name, _restore_missing), kept):
                namespace[name] = self._restored(kept)
        for name in [n for n in namespace if n not in self.names and not _adapters(n)]:
            del namespace[name]
        for cls, attributes, names in self.classes:
            own = vars(cls)
            for key, kept in attributes.items():
                if not _same(own.get(key, _restore_missing), kept):
                    setattr(cls, key, self._restored(kept))
            for key in [k for k, v in own.items()
                        if k not in names and not _adapters(k) and _is_data(v)]:
                delattr(cls, key)


_restore_missing = object()


def _restore(key):
    pristine = _PRISTINE.get(key)
    if pristine is not None:
        pristine.restore()


class _Database:
    """An environment of the database convention: its tool functions by name."""

    def __init__(self, name, tools):
        self.__name__ = name
        self.tools = tools


def _load(req):
    key, code, class_name = req["env"], req["code"], req.get("class_name") or ""
    convention = req.get("convention", "class")
    if convention not in ("class", "database"):
        return _fail("bad_request", "unknown convention %r" % (convention,))
    module = types.ModuleType("envsim_env_" + str(len(_ENVS)))
    module.__dict__["__builtins__"] = builtins
    label = class_name if convention == "class" else "database"
    try:
        compiled = compile(code, "<env %s>" % label, "exec")
        exec(compiled, module.__dict__)
    except MemoryError:
        return _fail("memory", "out of memory while loading the environment")
    except BaseException as exc:  # SystemExit and KeyboardInterrupt included: env code is untrusted
        return _fail("load_error", "%s: %s" % (type(exc).__name__, exc), traceback.format_exc(limit=8))
    _SOURCES[key] = (compiled, class_name if convention == "class" else None, code)
    _PRISTINE[key] = _Pristine(module)
    if convention == "database":
        return _load_database(key, module)
    cls = module.__dict__.get(class_name)
    if not isinstance(cls, type):
        return _fail("load_error", "the code defines no class named %r" % class_name)
    _ENVS[key] = cls
    return {"ok": True}


def _load_database(key, module):
    """The module's public functions defined in the code itself (not imported ones) are the
    tools; each takes the database as its first positional parameter."""
    tools = {}
    for name, member in module.__dict__.items():
        if name.startswith("_") or not inspect.isfunction(member):
            continue
        if member.__module__ != module.__name__:
            continue
        try:
            params = list(inspect.signature(member).parameters.values())
        except (TypeError, ValueError) as exc:
            return _fail("load_error", "tool function %s(): no signature: %s" % (name, exc))
        if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
            return _fail("load_error", "tool function %s() takes no database parameter: a tool of the "
                         "database convention is def %s(data, ...); private helpers start with _" % (name, name))
        tools[name] = member
    if not tools:
        return _fail("load_error", "the code defines no public function (the database convention's tools)")
    _ENVS[key] = _Database(module.__name__, tools)
    return {"ok": True}


def _annotation_text(ann):
    """`str` for plain classes, the written form for typing constructs (`Optional[int]`,
    `str | None`, `list[str]`) and for string annotations."""
    if isinstance(ann, str):
        return ann
    if type(ann) is type:
        return ann.__name__
    return str(ann)


def _describe(req):
    cls = _ENVS.get(req["env"])
    if cls is None:
        return _fail("bad_request", "environment %r is not loaded" % req["env"])
    methods = []
    if isinstance(cls, _Database):
        # The first parameter (self, or the database) is not one of the call's arguments.
        members = sorted(cls.tools.items())
    else:
        members = inspect.getmembers(cls, inspect.isfunction)
    for name, member in members:
        if name.startswith("_"):
            continue
        params = []
        for p in list(inspect.signature(member).parameters.values())[1:]:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                params.append({"name": p.name, "kind": str(p.kind), "required": False})
                continue
            ann = p.annotation
            params.append({
                "name": p.name,
                "required": p.default is p.empty,
                "annotation": None if ann is p.empty else _annotation_text(ann),
            })
        methods.append({"name": name, "params": params, "doc": inspect.getdoc(member) or ""})
    return {"ok": True, "methods": methods}


def _public_state(instance):
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}


def _construct(cls, state_text, alias):
    """EnvScaler's construction: `cls(config)` (falling back to `cls({})` and `cls()` on
    TypeError), then every top-level key of the config set as an attribute.

    With `alias` the attributes are the very objects of the config given to the constructor, so
    a class that keeps `self.init_config` sees every mutation twice (the reference's
    trajectories). Without it, when the constructor kept the config or one of its top-level
    values, the attributes come from a second, independent decoding of the state; otherwise the
    config's own objects are used, as nothing else refers to them. Returns the instance and the
    decoded state (pristine only when it was decoded separately)."""
    try:
        config = json.loads(state_text)
    except ValueError as exc:  # only the state's text: the constructor's own errors are its own
        raise _InvalidCall("the state is not valid JSON: %s" % exc)
    if not isinstance(config, dict):
        raise _InvalidCall("the state must be an object")
    if alias:
        # A snapshot of an aliased instance holds `init_config` as a separate copy; drop it so
        # the constructor's own `self.init_config = init_config` re-creates the alias.
        config.pop("init_config", None)
    originals = {id(config)} | {id(v) for v in config.values() if isinstance(v, (dict, list))}
    try:
        instance = cls(config)
    except TypeError:
        try:
            instance = cls({})
        except TypeError:
            instance = cls()
    attributes = config
    if not alias and any(id(v) in originals for v in vars(instance).values()):
        attributes = json.loads(state_text)
    for key, value in attributes.items():
        setattr(instance, key, value)
    return instance


class _InvalidCall(Exception):
    pass


def _traced_class(cls, reads):
    """A subclass that records reads of public, non-callable instance attributes."""

    def __getattribute__(self, name):
        value = object.__getattribute__(self, name)
        if not name.startswith("_") and name in object.__getattribute__(self, "__dict__"):
            reads.paths.add("/" + _escape(name))
        return value

    return type(cls.__name__, (cls,), {"__getattribute__": __getattribute__})


# One encoder for every compact encoding: `json.dumps` with options builds a new encoder per call,
# which costs as much as encoding a small attribute.
_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_STRING = json.encoder.encode_basestring


def _dump(value, label):
    """JSON text of a value, plus the list of non-JSON conversions: the C encoder first; when
    decoding its text does not give back an equal value (tuples, non-string keys, sets, objects),
    the slow converter runs and reports each conversion."""
    try:
        text = _COMPACT(value)
        if json.loads(text) == value:
            return text, []
    except (TypeError, ValueError):
        pass
    return _convert(value, label)


_SIGNATURES = {}

# The instance left by the last successful call and the JSON text of its state. A call on exactly
# that state (the next step of a chain) continues with the live instance instead of decoding and
# constructing again. Only instances without private attributes qualify, so the result is the
# same as from a fresh construction.
_LIVE = []


def _take_live(env, state_text):
    """The live instance and its per-attribute JSON texts, when `state_text` is its state."""
    if _LIVE and _LIVE[0] == env and _LIVE[1] == state_text:
        instance, texts = _LIVE[2], _LIVE[3]
        del _LIVE[:]
        return instance, texts
    del _LIVE[:]
    return None, None


def _dump_state(state, unchanged_text, previous_texts):
    """JSON text of the state (compact), its per-attribute texts, and the conversions.

    An attribute whose text equals its text after the previous call of a chain, or a whole state
    whose text equals the text received, needs no check for non-JSON values; the other
    attributes are decoded back and compared, and converted with a report when they differ."""
    texts, converted, unverified = {}, [], []
    for key, value in state.items():
        try:
            texts[key] = _COMPACT(value)
        except (TypeError, ValueError):
            texts[key], found = _convert(value, "/" + _escape(key))
            converted.extend(found)
            continue
        if previous_texts is None or previous_texts.get(key) != texts[key]:
            unverified.append(key)
    whole = _assemble(texts)
    if previous_texts is None and whole == unchanged_text:
        return whole, texts, converted
    repaired = False
    for key in unverified:
        if json.loads(texts[key]) != state[key]:
            texts[key], found = _convert(state[key], "/" + _escape(key))
            converted.extend(found)
            repaired = True
    return (_assemble(texts) if repaired else whole), texts, converted


def _assemble(texts):
    return "{" + ",".join(_STRING(k) + ":" + t for k, t in texts.items()) + "}"


def _convert(value, label):
    converted = []
    text = _COMPACT(_to_json(value, label, converted))
    return text, converted


def _check_arguments(cls, tool, method, args):
    """Raises TypeError when the arguments do not fit the tool's signature."""
    key = (cls, tool)
    signature = _SIGNATURES.get(key)
    if signature is None:
        signature = _SIGNATURES[key] = inspect.signature(method)
    signature.bind(**args)


def _call(req, state_text):
    cls = _ENVS.get(req.get("env"))
    if cls is None:
        return _fail("bad_request", "environment %r is not loaded" % req.get("env"))
    if isinstance(cls, _Database):
        return _call_database(cls, req, state_text)
    tool, args = req.get("tool"), req.get("args")
    if not isinstance(args, dict):
        return _fail("invalid_call", "the arguments must be an object")
    if not isinstance(tool, str) or tool.startswith("_") or not callable(getattr(cls, tool, None)):
        return _fail("invalid_call", "unknown tool %r" % (tool,))
    _CLOCK[0] = float(req.get("clock", 1735689600.0))
    _RNG.seed(int(req.get("seed", 0)))
    _reset_workdir()
    _restore(req.get("env"))
    reads = _Reads() if req.get("trace") else None
    started = time.perf_counter()
    alias = bool(req.get("alias_init_config"))
    reusable = not alias and reads is None
    state_text = state_text.rstrip("\n")
    try:
        try:
            instance, previous_texts = _take_live(req.get("env"), state_text) if reusable else (None, None)
            if instance is None:
                instance = _construct(cls, state_text, alias)
        except _InvalidCall as exc:
            return _fail("invalid_call", str(exc))
        if reads is not None:
            for key, value in list(_public_state(instance).items()):
                object.__setattr__(instance, key, _wrap(value, "/" + _escape(key), reads))
            instance.__class__ = _traced_class(cls, reads)
        method = getattr(instance, tool)
        try:
            _check_arguments(cls, tool, method, args)
        except TypeError as exc:
            return _fail("invalid_call", "%s(): %s" % (tool, exc))
        record = _start_coverage(req)
        try:
            result = method(**args)
        except MemoryError:
            raise
        except BaseException as exc:  # env code is untrusted: SystemExit etc. are its failures too
            _stop_coverage(record)
            return _raised(exc, instance, cls, reads)
        finally:
            _stop_coverage(record)
    except MemoryError:
        return _fail("memory", "out of memory in %s()" % tool)
    except BaseException as exc:
        return _fail("exception", "%s: %s" % (type(exc).__name__, exc), traceback.format_exc(limit=8))
    duration = time.perf_counter() - started
    try:
        if reads is not None:
            instance.__class__ = cls
            for key, value in list(_public_state(instance).items()):
                object.__setattr__(instance, key, _unwrap(value))
            result = _unwrap(result)
        state_json, texts, converted = _dump_state(_public_state(instance), state_text, previous_texts)
        observation_json, converted_obs = _dump(result, "#observation")
        observation = str(result)
        if reusable and not converted and not any(k.startswith("_") for k in vars(instance)):
            _LIVE[:] = [req.get("env"), state_json, instance, texts]
    except MemoryError:
        return _fail("memory", "out of memory while reading the state")
    except BaseException as exc:
        return _fail("exception", "cannot read the result: %s: %s" % (type(exc).__name__, exc))
    return _call_reply(observation, observation_json, state_json, converted + converted_obs, duration, reads)


def _decode_database(state_text):
    try:
        data = json.loads(state_text)
    except ValueError as exc:
        raise _InvalidCall("the state is not valid JSON: %s" % exc)
    if not isinstance(data, dict):
        raise _InvalidCall("the state must be an object")
    return data


def _call_database(env, req, state_text):
    """A call of the database convention: `tool(database, **args)` on the decoded state; the
    state after is the database as the function left it (keys added or removed included)."""
    tool, args = req.get("tool"), req.get("args")
    if not isinstance(args, dict):
        return _fail("invalid_call", "the arguments must be an object")
    function = env.tools.get(tool) if isinstance(tool, str) else None
    if function is None:
        return _fail("invalid_call", "unknown tool %r" % (tool,))
    _CLOCK[0] = float(req.get("clock", 1735689600.0))
    _RNG.seed(int(req.get("seed", 0)))
    _reset_workdir()
    _restore(req.get("env"))
    reads = _Reads() if req.get("trace") else None
    started = time.perf_counter()
    reusable = reads is None
    state_text = state_text.rstrip("\n")
    data = None
    try:
        try:
            data, previous_texts = _take_live(req.get("env"), state_text) if reusable else (None, None)
            if data is None:
                data = _decode_database(state_text)
        except _InvalidCall as exc:
            return _fail("invalid_call", str(exc))
        try:
            key = (env, tool)
            signature = _SIGNATURES.get(key)
            if signature is None:
                signature = _SIGNATURES[key] = inspect.signature(function)
            signature.bind(None, **args)
        except TypeError as exc:
            return _fail("invalid_call", "%s(): %s" % (tool, exc))
        if reads is not None:
            data = _wrap(data, "", reads)
        record = _start_coverage(req)
        try:
            result = function(data, **args)
        except MemoryError:
            raise
        except BaseException as exc:  # env code is untrusted: SystemExit etc. are its failures too
            _stop_coverage(record)
            return _raised_database(exc, data, reads)
        finally:
            _stop_coverage(record)
    except MemoryError:
        return _fail("memory", "out of memory in %s()" % tool)
    except BaseException as exc:
        return _fail("exception", "%s: %s" % (type(exc).__name__, exc), traceback.format_exc(limit=8))
    duration = time.perf_counter() - started
    try:
        if reads is not None:
            data = _unwrap(data)
            result = _unwrap(result)
        if all(isinstance(k, str) for k in data):
            state_json, texts, converted = _dump_state(data, state_text, previous_texts)
        else:  # a top-level key that is not a string: converted (and reported) as a whole
            state_json, converted = _convert(data, "")
            texts = None
        observation_json, converted_obs = _dump(result, "#observation")
        observation = str(result)
        if reusable and not converted and texts is not None:
            _LIVE[:] = [req.get("env"), state_json, data, texts]
    except MemoryError:
        return _fail("memory", "out of memory while reading the state")
    except BaseException as exc:
        return _fail("exception", "cannot read the result: %s: %s" % (type(exc).__name__, exc))
    return _call_reply(observation, observation_json, state_json, converted + converted_obs, duration, reads)


def _raised_database(exc, data, reads):
    """As `_raised`, for the database convention: the database as the function left it."""
    detail = traceback.format_exc(limit=8)
    error = {"kind": "exception", "message": "%s: %s" % (type(exc).__name__, exc), "traceback": detail}
    try:
        if reads is not None:
            data = _unwrap(data)
        if all(isinstance(k, str) for k in data):
            state_json, _texts, _converted = _dump_state(data, None, None)
        else:
            state_json, _converted = _convert(data, "")
    except BaseException:  # the state cannot be read: report the exception alone
        return {"ok": False, "error": error}
    return _Raw('"ok": false, "error": %s, "state_after": %s' % (json.dumps(error), state_json))


def _call_reply(observation, observation_json, state_json, converted, duration, reads):
    """A successful call's reply, assembled as text so the (possibly large) state, already
    encoded, is not encoded again."""
    extra = {"converted": converted, "duration_ms": duration * 1000.0}
    if reads is not None:
        extra["reads"] = sorted(reads.paths)
    return _Raw(
        '"ok": true, "observation": %s, "observation_json": %s, "state_after": %s, %s'
        % (_STRING(observation), observation_json, state_json, json.dumps(extra)[1:-1])
    )


def _construct_op(req, state_text):
    """The state of the instance built from `state_text` with no call: what the constructor
    adds (attributes the file lacks) and the file's own keys. A transition's state before is
    this state; the file is only the constructor's input. For the database convention there is
    no constructor: the state is the database as decoded."""
    cls = _ENVS.get(req.get("env"))
    if cls is None:
        return _fail("bad_request", "environment %r is not loaded" % req.get("env"))
    if isinstance(cls, _Database):
        try:
            data = _decode_database(state_text.rstrip("\n"))
        except _InvalidCall as exc:
            return _fail("invalid_call", str(exc))
        try:
            state_json, _texts, converted = _dump_state(data, None, None)
        except MemoryError:
            return _fail("memory", "out of memory while reading the state")
        return _Raw('"ok": true, "state": %s, %s' % (state_json, json.dumps({"converted": converted})[1:-1]))
    _CLOCK[0] = float(req.get("clock", 1735689600.0))
    _RNG.seed(int(req.get("seed", 0)))
    _reset_workdir()
    _restore(req.get("env"))
    try:
        try:
            instance = _construct(cls, state_text.rstrip("\n"), bool(req.get("alias_init_config")))
        except _InvalidCall as exc:
            return _fail("invalid_call", str(exc))
        state_json, _texts, converted = _dump_state(_public_state(instance), None, None)
    except MemoryError:
        return _fail("memory", "out of memory while constructing the environment")
    except BaseException as exc:  # the constructor is environment code
        return _fail("exception", "%s: %s" % (type(exc).__name__, exc), traceback.format_exc(limit=8))
    return _Raw('"ok": true, "state": %s, %s' % (state_json, json.dumps({"converted": converted})[1:-1]))


def _raised(exc, instance, cls, reads):
    """The reply for a tool that raised: the exception, and the state as the code left it
    (changes made before the exception stay, as in the real environment, whose agent sees
    them next). The instance is not kept live: a chain continues from the reported state."""
    detail = traceback.format_exc(limit=8)
    error = {"kind": "exception", "message": "%s: %s" % (type(exc).__name__, exc), "traceback": detail}
    try:
        if reads is not None:
            instance.__class__ = cls
            for key, value in list(_public_state(instance).items()):
                object.__setattr__(instance, key, _unwrap(value))
        state_json, _texts, _converted = _dump_state(_public_state(instance), None, None)
    except BaseException:  # the state cannot be read: report the exception alone
        return {"ok": False, "error": error}
    return _Raw('"ok": false, "error": %s, "state_after": %s' % (json.dumps(error), state_json))


class _Raw:
    """A reply whose fields are already JSON text."""

    def __init__(self, body):
        self.body = body


def _reset_workdir():
    """Each call starts in an empty working directory (the executor's private one only)."""
    if _WORKDIR is None:
        return
    try:
        if os.listdir(_WORKDIR):
            for name in os.listdir(_WORKDIR):
                target = os.path.join(_WORKDIR, name)
                if os.path.isdir(target) and not os.path.islink(target):
                    shutil.rmtree(target, ignore_errors=True)
                else:
                    os.unlink(target)
        os.chdir(_WORKDIR)
    except OSError:
        pass


def _fail(kind, message, detail=None):
    error = {"kind": kind, "message": message}
    if detail:
        error["traceback"] = detail
    return {"ok": False, "error": error}


def _hello(_req, sandbox):
    facts = dict(sandbox, **_limits_facts())
    # The string hash seed the process runs with (None: randomised, as under -E, which ignores
    # PYTHONHASHSEED): the order of a set of strings depends on it.
    seed = os.environ.get("PYTHONHASHSEED")
    facts["hash_seed"] = None if sys.flags.ignore_environment or seed in (None, "random") else int(seed)
    return {"ok": True, "python": sys.version.split()[0], "executable": sys.executable, "pid": os.getpid(), "sandbox": facts}


def main():
    # Python before 3.11 puts this script's directory (a shared temporary directory) first on
    # sys.path; environment code must not import from there.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != here]
    # File descriptors the executor's process leaked without close-on-exec (a socket, a file
    # open for writing) would carry rights the sandbox does not grant: only 0, 1 and 2 stay.
    os.closerange(3, min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16))
    out = sys.stdout
    # Env code that prints must not corrupt the protocol: its stdout goes to stderr.
    sys.stdout = sys.stderr
    lines = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="strict", newline="\n")
    sys.stdin = io.StringIO("")
    _install_determinism()
    try:
        sandbox = _install_sandbox(_WORKDIR)
    except BaseException as exc:
        sys.stderr.write("envsim runner: cannot set up the sandbox: %s\n" % exc)
        sys.stderr.flush()
        os._exit(70)
    for line in lines:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("not an object")
            op = req.get("op")
        except ValueError as exc:
            req, op = {}, None
            reply = _fail("bad_request", "not a JSON object: %s" % exc)
        else:
            if op == "call":
                # The state travels on its own line so it can be decoded twice without a copy.
                del _COVERAGE[:]
                reply = _call(req, lines.readline())
                if _COVERAGE:
                    reply = _with_coverage(reply, _COVERAGE.pop().reply())
            elif op == "construct":
                reply = _construct_op(req, lines.readline())
            elif op == "load":
                reply = _load(req)
            elif op == "describe":
                reply = _describe(req)
            elif op == "code_map":
                reply = _code_map_op(req)
            elif op == "hello":
                reply = _hello(req, sandbox)
            else:
                reply = _fail("bad_request", "unknown op %r" % (op,))
        ident = json.dumps(req.get("id"))
        try:
            if isinstance(reply, _Raw):
                text = '{"id": %s, %s}' % (ident, reply.body)
            else:
                reply["id"] = req.get("id")
                text = json.dumps(reply, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"id": req.get("id"), "ok": False, "error": {"kind": "exception", "message": "unserialisable reply: %s" % exc}})
        except MemoryError:
            text = json.dumps({"id": req.get("id"), "ok": False, "error": {"kind": "memory", "message": "out of memory while writing the reply"}})
        if len(text) > OUTPUT_CAP:
            text = json.dumps({"id": req.get("id"), "ok": False, "error": {"kind": "output_too_large", "message": "the reply is %d bytes, over the %d-byte cap (ENVSIM_REPLY_CAP_MB raises it)" % (len(text), OUTPUT_CAP)}})
        out.write(text)
        out.write("\n")
        out.flush()


if __name__ == "__main__":
    main()
