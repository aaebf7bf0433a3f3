"""envsim worker: runs environment code for the Rust executor.

One process serves one request at a time over JSON lines (stdin -> stdout). Standard library
only. The Rust side owns the process: it applies the wall-clock timeout, kills and replaces a
worker that hangs, crashes or exceeds its limits, and never trusts what comes back.

Requests (one JSON object per line, answered by one line with the same "id"):
  {"op": "hello"}                                  -> interpreter and sandbox facts
  {"op": "load", "env": K, "code": S, "class_name": C}
  {"op": "describe", "env": K}                     -> public methods and their signatures
  {"op": "call", "env": K, "tool": T, "args": {...},
   "seed": int, "clock": float, "alias_init_config": bool, "trace": bool}
  followed by one line holding the state JSON

Every reply is {"id", "ok": true, ...} or {"id", "ok": false, "error": {"kind", "message"}}.
Error kinds: load_error, invalid_call, exception, memory, output_too_large, bad_request.
"""

import builtins
import datetime as _datetime
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
MEMORY_BYTES = int(os.environ.get("ENVSIM_MEMORY_BYTES", str(1024 * 1024 * 1024)))

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
# Sandbox: limits, no child processes, no network sockets.

SECCOMP_SET_MODE_FILTER = 1
PR_SET_NO_NEW_PRIVS = 38
AUDIT_ARCH_X86_64 = 0xC000003E
# x86_64 syscall numbers
SYS = {"socket": 41, "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
       "clone3": 435, "socketpair": 53, "ptrace": 101}
CLONE_THREAD = 0x00010000
AF_UNIX = 1


def _bpf(code, jt, jf, k):
    return struct.pack("HBBI", code, jt, jf, k)


def _seccomp_program():
    """A BPF filter: EPERM for fork/vfork/execve/ptrace, for clone without CLONE_THREAD and for
    sockets other than AF_UNIX; ENOSYS for clone3; everything else is allowed."""
    LD_W_ABS, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06
    ALLOW, EPERM, ENOSYS = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    prog = [
        _bpf(LD_W_ABS, 0, 0, 4),                      # arch
        _bpf(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        _bpf(RET_K, 0, 0, ALLOW),                     # unknown arch: leave it to the rlimits
        _bpf(LD_W_ABS, 0, 0, 0),                      # syscall nr
    ]
    for name in ("fork", "vfork", "execve", "execveat", "ptrace"):
        prog.append(_bpf(JEQ_K, 0, 1, SYS[name]))
        prog.append(_bpf(RET_K, 0, 0, EPERM))
    # clone3 cannot be inspected (flags live in memory): ENOSYS makes glibc fall back to clone.
    prog.append(_bpf(JEQ_K, 0, 1, SYS["clone3"]))
    prog.append(_bpf(RET_K, 0, 0, ENOSYS))
    # clone: allow only threads (flags in args[0], low word at offset 16)
    prog.append(_bpf(JEQ_K, 0, 4, SYS["clone"]))
    prog.append(_bpf(LD_W_ABS, 0, 0, 16))
    prog.append(_bpf(JSET_K, 1, 0, CLONE_THREAD))
    prog.append(_bpf(RET_K, 0, 0, EPERM))
    prog.append(_bpf(RET_K, 0, 0, ALLOW))
    # socket / socketpair: only AF_UNIX (domain in args[0])
    prog.append(_bpf(LD_W_ABS, 0, 0, 0))
    for name in ("socket", "socketpair"):
        prog.append(_bpf(JEQ_K, 0, 3, SYS[name]))
        prog.append(_bpf(LD_W_ABS, 0, 0, 16))
        prog.append(_bpf(JEQ_K, 1, 0, AF_UNIX))
        prog.append(_bpf(RET_K, 0, 0, EPERM))
        prog.append(_bpf(LD_W_ABS, 0, 0, 0))
    prog.append(_bpf(RET_K, 0, 0, ALLOW))
    return b"".join(prog)


def _install_seccomp():
    """Installs the filter through libc; returns a short status string."""
    if os.uname().machine != "x86_64":
        return "unavailable (filter written for x86_64)"
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        program = _seccomp_program()
        count = len(program) // 8
        buf = ctypes.create_string_buffer(program)

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        fprog = SockFprog(count, ctypes.cast(buf, ctypes.c_void_p))
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return "failed: no_new_privs errno %d" % ctypes.get_errno()
        # seccomp(2) is syscall 317 on x86_64
        if libc.syscall(317, SECCOMP_SET_MODE_FILTER, 0, ctypes.byref(fprog)) != 0:
            return "failed: seccomp errno %d" % ctypes.get_errno()
        return "on"
    except Exception as exc:  # the worker still runs with rlimits only
        return "failed: %s" % exc


def _install_limits():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024 * 1024, 64 * 1024 * 1024))


def _arm_cpu_limit():
    """Lets the coming call use CPU_SECONDS more CPU time; past that the kernel sends SIGXCPU and
    the worker dies (the Rust side reports a timeout and replaces it)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = used + CPU_SECONDS
    if hard != resource.RLIM_INFINITY and soft > hard:
        soft = hard
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


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
# Environments and calls.

_ENVS = {}
# The private working directory the executor created for this worker. Only a directory handed
# over explicitly (ENVSIM_WORKDIR) and named like one of the executor's is ever emptied, so
# importing or running this file anywhere else can never delete files.
_WORKDIR = os.environ.get("ENVSIM_WORKDIR") or None
if _WORKDIR is not None and not os.path.basename(os.path.normpath(_WORKDIR)).startswith("envsim-worker-"):
    _WORKDIR = None


def _load(req):
    key, code, class_name = req["env"], req["code"], req["class_name"]
    module = types.ModuleType("envsim_env_" + str(len(_ENVS)))
    module.__dict__["__builtins__"] = builtins
    try:
        exec(compile(code, "<env %s>" % class_name, "exec"), module.__dict__)
    except MemoryError:
        return _fail("memory", "out of memory while loading the environment")
    except BaseException as exc:  # SystemExit and KeyboardInterrupt included: env code is untrusted
        return _fail("load_error", "%s: %s" % (type(exc).__name__, exc), traceback.format_exc(limit=8))
    cls = module.__dict__.get(class_name)
    if not isinstance(cls, type):
        return _fail("load_error", "the code defines no class named %r" % class_name)
    _ENVS[key] = cls
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
    for name, member in inspect.getmembers(cls, inspect.isfunction):
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
    config = json.loads(state_text)
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
    tool, args = req.get("tool"), req.get("args")
    if not isinstance(args, dict):
        return _fail("invalid_call", "the arguments must be an object")
    if not isinstance(tool, str) or tool.startswith("_") or not callable(getattr(cls, tool, None)):
        return _fail("invalid_call", "unknown tool %r" % (tool,))
    _CLOCK[0] = float(req.get("clock", 1735689600.0))
    _RNG.seed(int(req.get("seed", 0)))
    _reset_workdir()
    reads = _Reads() if req.get("trace") else None
    _arm_cpu_limit()
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
        except ValueError as exc:
            return _fail("invalid_call", "the state is not valid JSON: %s" % exc)
        if reads is not None:
            for key, value in list(_public_state(instance).items()):
                object.__setattr__(instance, key, _wrap(value, "/" + _escape(key), reads))
            instance.__class__ = _traced_class(cls, reads)
        method = getattr(instance, tool)
        try:
            _check_arguments(cls, tool, method, args)
        except TypeError as exc:
            return _fail("invalid_call", "%s(): %s" % (tool, exc))
        result = method(**args)
    except MemoryError:
        return _fail("memory", "out of memory in %s()" % tool)
    except BaseException as exc:  # env code is untrusted: SystemExit etc. are its failures too
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
    extra = {"converted": converted + converted_obs, "duration_ms": duration * 1000.0}
    if reads is not None:
        extra["reads"] = sorted(reads.paths)
    # Assembled as text so the (possibly large) state is encoded once.
    return _Raw(
        '"ok": true, "observation": %s, "observation_json": %s, "state_after": %s, %s'
        % (_STRING(observation), observation_json, state_json, json.dumps(extra)[1:-1])
    )


class _Raw:
    """A successful reply whose fields are already JSON text."""

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
    return {"ok": True, "python": sys.version.split()[0], "executable": sys.executable, "pid": os.getpid(), "sandbox": sandbox}


def main():
    out = sys.stdout
    # Env code that prints must not corrupt the protocol: its stdout goes to stderr.
    sys.stdout = sys.stderr
    lines = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="strict", newline="\n")
    sys.stdin = io.StringIO("")
    _install_determinism()
    _install_limits()
    sandbox = {"seccomp": _install_seccomp(), "memory_bytes": MEMORY_BYTES, "cpu_seconds_per_call": CPU_SECONDS}
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
                reply = _call(req, lines.readline())
            elif op == "load":
                reply = _load(req)
            elif op == "describe":
                reply = _describe(req)
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
            text = json.dumps({"id": req.get("id"), "ok": False, "error": {"kind": "output_too_large", "message": "the reply is %d bytes, over the %d-byte cap" % (len(text), OUTPUT_CAP)}})
        out.write(text)
        out.write("\n")
        out.flush()


if __name__ == "__main__":
    main()
