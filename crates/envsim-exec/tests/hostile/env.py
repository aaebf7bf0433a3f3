"""Hostile environment code for tests/sandbox.rs: one tool per attack on the executor's sandbox.

Tools either perform the attack and let the exception propagate (the call then fails with kind
`exception` and the message names the error), or, where several attempts are made, return what
each attempt gave as `{"name": "ErrorType errno"}` (or "succeeded ..."). Tools that would do harm
outside the sandbox if it failed (kill -1, killing the parent) first probe with signal 0 and stop
there when the probe is not refused.
"""

import ctypes
import mmap
import os
import resource
import signal
import socket
import subprocess
import sys


def _outcome(action):
    try:
        result = action()
    except OSError as exc:
        return "%s %s" % (type(exc).__name__, exc.errno)
    except Exception as exc:  # ValueError from resource, RuntimeError from threading
        return "%s: %s" % (type(exc).__name__, exc)
    return "succeeded %r" % (result,)


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _raw(nr, *args):
    """syscall(nr, args...) -> "ok <result>" or "errno <n>"."""
    libc = _libc()
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if result == -1:
        return "errno %d" % ctypes.get_errno()
    return "ok %d" % result


class Hostile:
    def __init__(self, init_config=None):
        self.items = {}

    # -- identity, so the test can tell a kept worker from a replaced one

    def whoami(self):
        return {"pid": os.getpid()}

    # -- files

    def write_file(self, path: str):
        with open(path, "w") as f:
            f.write("written by hostile environment code")
        return {"written": path}

    def read_file(self, path: str):
        with open(path) as f:
            return {"content": f.read()}

    def list_dir(self, path: str):
        return {"entries": sorted(os.listdir(path))}

    def chmod(self, path: str):
        os.chmod(path, 0o777)
        return {"chmod": path}

    def link_tricks(self, path: str):
        """Reach a forbidden file through a symbolic and a hard link made in the working
        directory."""
        os.symlink(path, "soft")
        out = {"symlink": _outcome(lambda: open("soft").read())}
        out["hardlink"] = _outcome(lambda: os.link(path, "hard"))
        out["hardlink_read"] = _outcome(lambda: open("hard").read())
        return out

    def proc_writes(self):
        def write(name, data):
            def go():
                with open("/proc/self/" + name, "wb", buffering=0) as f:
                    return f.write(data)
            return go

        return {
            "mem": _outcome(write("mem", b"\0" * 8)),
            "oom_score_adj": _outcome(write("oom_score_adj", b"-1000")),
            "parent_cmdline": _outcome(lambda: open("/proc/%d/cmdline" % os.getppid(), "rb").read()),
            "pid1_environ": _outcome(lambda: open("/proc/1/environ", "rb").read()),
        }

    def big_file(self):
        with open("big.bin", "wb") as f:
            chunk = b"\0" * (1 << 20)
            for _ in range(100):
                f.write(chunk)
        return {"written": 100 << 20}

    def many_files(self):
        handles = []
        try:
            for i in range(10_000):
                handles.append(open("f%d" % i, "w"))
        finally:
            for h in handles:
                h.close()
        return {"opened": len(handles)}

    # -- limits

    def raise_limits(self):
        out = {}
        for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE"):
            res = getattr(resource, name)
            soft, hard = resource.getrlimit(res)
            out[name + " setrlimit"] = _outcome(lambda: resource.setrlimit(res, (hard, hard)))
            out[name + " prlimit"] = _outcome(
                lambda: resource.prlimit(0, res, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)))
            out[name + " unchanged"] = resource.getrlimit(res) == (soft, hard)
        out["limits"] = {
            "cpu_hard": resource.getrlimit(resource.RLIMIT_CPU)[1],
            "as": resource.getrlimit(resource.RLIMIT_AS)[0],
            "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
        }
        return out

    def ignore_sigxcpu(self):
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        return {"ignored": True}

    def spin(self):
        while True:
            pass

    def nap(self, seconds: float):
        # Sleeps without using CPU: the test kills the worker meanwhile.
        import time

        time.sleep(seconds)
        return {"slept": seconds}

    def spin_with_sigxcpu_blocked(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGXCPU])
        while True:
            pass

    def allocate(self):
        block = bytearray(10 * 1024 ** 3)
        return {"n": len(block)}

    def allocate_slowly(self):
        blocks = []
        while True:
            blocks.append(bytearray(16 * 1024 * 1024))

    def recurse(self, limit: int = 0):
        if limit:
            sys.setrecursionlimit(limit)

        def down(n):
            return down(n + 1) + 1

        return {"depth": down(0)}

    def shout(self):
        return {"data": "x" * (64 * 1024 * 1024)}

    def noise(self):
        chunk = "y" * 65536
        for _ in range(320):  # 20 MiB on stdout (diverted to stderr) and stderr
            print(chunk)
            sys.stderr.write(chunk)
        return {"noisy": True}

    # -- processes

    def fork_bomb(self):
        pids = []
        for _ in range(1000):
            pids.append(os.fork())
        return {"pids": pids}

    def spawn(self):
        return {
            "subprocess": _outcome(lambda: subprocess.run(["/bin/true"]).returncode),
            "execv": _outcome(lambda: os.execv("/bin/sh", ["sh", "-c", "true"])),
            "posix_spawn": _outcome(lambda: os.posix_spawn("/bin/true", ["true"], {})),
            "system": _outcome(lambda: os.system("true")),
            "vfork": _raw(58),
            "clone_process": _raw(56, signal.SIGCHLD, 0, 0, 0, 0),
            "clone_newuser_thread": _raw(56, 0x00010000 | 0x00000800 | 0x00000100 | 0x10000000, 0, 0, 0, 0),
        }

    def threads(self):
        import threading

        box = []
        t = threading.Thread(target=lambda: box.append(sum(range(100))))
        t.start()
        t.join()
        return {"thread_result": box[0]}

    def kill_everyone(self):
        # Probe first: if signal 0 to every process is not refused, the sandbox is broken and
        # SIGKILL would hit the test runner (and as root, everything); stop here.
        probe = _outcome(lambda: os.kill(-1, 0))
        if not probe.startswith("PermissionError"):
            return {"probe": probe, "sent": False}
        return {"probe": probe, "sent": True, "kill": _outcome(lambda: os.kill(-1, signal.SIGKILL))}

    def kill_parent(self):
        parent = os.getppid()
        probe = _outcome(lambda: os.kill(parent, 0))
        if not probe.startswith("PermissionError"):
            return {"probe": probe, "sent": False}
        return {
            "probe": probe,
            "sent": True,
            "kill": _outcome(lambda: os.kill(parent, signal.SIGKILL)),
            "killpg_own_group": _outcome(lambda: os.killpg(os.getpgrp(), signal.SIGKILL)),
            "tgkill": _raw(234, parent, parent, 0),
            "pidfd_open": _raw(434, parent, 0),
        }

    def sigio_parent(self):
        """Ask the kernel to send SIGKILL to the parent when a pipe becomes readable (F_SETOWN,
        F_SETSIG, O_ASYNC). Stops before arming it if F_SETOWN is not refused."""
        import fcntl

        r, w = os.pipe()
        try:
            owner = _outcome(lambda: fcntl.fcntl(r, fcntl.F_SETOWN, os.getppid()))
            if not owner.startswith("PermissionError"):
                return {"F_SETOWN": owner, "armed": False}
            return {
                "F_SETOWN": owner,
                "F_SETSIG": _outcome(lambda: fcntl.fcntl(r, 10, signal.SIGKILL)),
                "F_SETFL": _outcome(lambda: fcntl.fcntl(r, fcntl.F_SETFL, os.O_NONBLOCK)),
            }
        finally:
            os.close(r)
            os.close(w)

    def kill_self(self):
        os.kill(os.getpid(), signal.SIGKILL)

    def ptrace(self):
        libc = _libc()

        def call(request, pid):
            ctypes.set_errno(0)
            if libc.ptrace(ctypes.c_long(request), ctypes.c_long(pid), None, None) == -1:
                return "errno %d" % ctypes.get_errno()
            return "ok"

        return {
            "attach_parent": call(16, os.getppid()),  # PTRACE_ATTACH
            "traceme": call(0, 0),                    # PTRACE_TRACEME
            "process_vm_readv": _raw(310, os.getppid(), 0, 0, 0, 0, 0),
        }

    def setuid(self):
        os.setuid(65534)
        return {"uid": os.getuid()}

    # -- namespaces, mounts, kernel interfaces

    def escape(self):
        libc = _libc()
        return {
            "unshare": _raw(272, 0x10000000),                   # CLONE_NEWUSER
            "unshare_mount": _raw(272, 0x00020000),              # CLONE_NEWNS
            "setns": _raw(308, 0, 0),
            "mount": _outcome(lambda: self._mount(libc)),
            "umount": _raw(166, 0, 0),
            "chroot": _outcome(lambda: os.chroot("/")),
            "pivot_root": _raw(155, 0, 0),
            "io_uring_setup": _raw(425, 8, 0),
            "bpf": _raw(321, 0, 0, 0),
            "perf_event_open": _raw(298, 0, 0, -1, -1, 0),
            "userfaultfd": _raw(323, 0),
            "keyctl": _raw(250, 0, 0, 0, 0, 0),
            "seccomp": _raw(317, 2, 0, 0),  # SECCOMP_GET_ACTION_AVAIL
            "landlock_create_ruleset": _raw(444, 0, 0, 1),
            "memfd_create": _outcome(lambda: os.memfd_create("x")),
            "personality": _raw(135, 0xffffffff),
            "mknod": _outcome(lambda: os.mknod("node", 0o600 | 0o020000, os.makedev(1, 3))),
            "truncate_by_path": _raw(76, 0, 0),
        }

    @staticmethod
    def _mount(libc):
        ctypes.set_errno(0)
        if libc.mount(b"none", b"/tmp", b"tmpfs", ctypes.c_ulong(0), None) == -1:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return "mounted"

    def x32(self):
        # getpid is 39 on x86_64 and 39 | 0x40000000 in the x32 ABI.
        return {"native": _raw(39), "x32": _raw(39 | 0x40000000), "x32_openat": _raw(257 | 0x40000000, -100, 0, 0)}

    def i386(self):
        """`mov eax, 20 (getpid); int 0x80; ret`: a syscall through the 32-bit ABI."""
        code = b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"
        page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        return {"result": ctypes.CFUNCTYPE(ctypes.c_int)(address)()}

    # -- network

    def sockets(self):
        families = {
            "AF_INET": (socket.AF_INET, socket.SOCK_STREAM),
            "AF_INET_UDP": (socket.AF_INET, socket.SOCK_DGRAM),
            "AF_INET6": (socket.AF_INET6, socket.SOCK_STREAM),
            "AF_UNIX": (socket.AF_UNIX, socket.SOCK_STREAM),
            "AF_NETLINK": (socket.AF_NETLINK, socket.SOCK_RAW),
            "AF_PACKET": (socket.AF_PACKET, socket.SOCK_RAW),
        }
        out = {name: _outcome(lambda f=f: socket.socket(*f).close()) for name, f in families.items()}
        out["socketpair_inet"] = _outcome(lambda: socket.socketpair(socket.AF_INET))
        out["connect_localhost"] = _outcome(lambda: socket.create_connection(("127.0.0.1", 22), timeout=1))
        a, b = socket.socketpair()  # AF_UNIX pairs are allowed (asyncio needs one)
        a.sendall(b"ping")
        out["socketpair_unix"] = b.recv(4).decode()
        a.close()
        b.close()
        return out
