"""Ordinary environment code for tests/sandbox.rs: the standard library at work."""

import os, sys, json, time, threading, tempfile, re, decimal, datetime, collections, hashlib, random, uuid, math
import statistics, copy, csv, io, textwrap, string, itertools, functools, dataclasses, enum, typing, heapq
import bisect, array, struct, base64, zlib, gzip, pickle, difflib, fractions, secrets, logging, warnings
import traceback, inspect, signal, locale, unicodedata, ipaddress, calendar, html, urllib.parse, pathlib
import xml.etree.ElementTree as ET, shutil, queue, concurrent.futures, sqlite3, zoneinfo, asyncio

class Ordinary:
    """What ordinary environment code does with the standard library; all of it must keep
    working inside the sandbox (tests/sandbox.rs)."""

    def __init__(self, init_config=None):
        self.log = []

    def run(self):
        out = {}
        t = threading.Thread(target=lambda: out.__setitem__("thread", sum(range(1000))))
        t.start(); t.join()
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            out["pool"] = list(ex.map(lambda x: x * 2, range(5)))
        time.sleep(0.01)
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("hello"); name = f.name
        out["tmp"] = open(name).read(); os.unlink(name)
        os.makedirs("a/b", exist_ok=True)
        pathlib.Path("a/b/c.txt").write_text("x")
        shutil.copyfile("a/b/c.txt", "a/d.txt")
        os.rename("a/d.txt", "a/e.txt")
        out["files"] = sorted(os.listdir("a"))
        shutil.rmtree("a")
        out["dec"] = str(decimal.Decimal("1.1") + decimal.Decimal("2.2"))
        out["hash"] = hashlib.sha256(b"x").hexdigest()[:8]
        out["urandom"] = len(os.urandom(8)) + len(secrets.token_hex(4))
        out["cpu"] = os.cpu_count() is not None
        try:
            out["zone"] = str(datetime.datetime(2025, 1, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")))
        except zoneinfo.ZoneInfoNotFoundError:
            out["zone"] = "no time-zone data"
        out["sql"] = sqlite3.connect(":memory:").execute("select 1+1").fetchone()[0]
        out["gz"] = len(gzip.compress(b"x" * 100))
        out["pickle"] = pickle.loads(pickle.dumps({"a": 1}))
        out["et"] = ET.fromstring("<a><b/></a>").tag
        q = queue.Queue(); q.put(1); out["q"] = q.get(timeout=1)
        out["async"] = asyncio.run(self._co())
        signal.signal(signal.SIGALRM, lambda *a: None)
        out["locale"] = locale.getpreferredencoding()
        print("to stdout")
        logging.getLogger("x").warning("log line")
        out["uname"] = os.uname().sysname
        out["pid"] = os.getpid() > 0
        out["stat"] = os.stat(".").st_mode > 0
        out["isatty"] = sys.stdin.isatty()
        try:
            raise ValueError("x")
        except ValueError:
            out["tb"] = len(traceback.format_exc()) > 0
        return out

    async def _co(self):
        await asyncio.sleep(0.001)
        return 1
