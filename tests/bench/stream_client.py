#!/usr/bin/python3
"""tests/bench/stream_client.py: the follow-stream load of tests/bench/stream_bench.sh.

  stream_client.py direct URL TOKEN CA N SECONDS    N follows straight to kubesim (TLS, threads)
  stream_client.py gate HOST PORT TOKEN N SECONDS PIDFILE  N follows through fleetgate (plain
                                                   HTTP/1.1, one selector), fleetgate's RSS read
                                                   before and after they are open
  stream_client.py straight URL TOKEN CA N SECONDS  N follows straight to kubesim read as the
                                                   gate's are (HTTP/1.1, one thread, one
                                                   selector; TLS): the same client load on the
                                                   machine, without fleetgate

Each line carries kubesim's timestamp (timestamps=true: the time the line was due); its latency
is the time it arrived minus that. Prints JSON: lines, p50/p99 latency in ms, RSS figures."""
import calendar
import json
import os
import selectors
import socket
import ssl
import sys
import threading
import time


def stamp(line):
    """Seconds since the epoch of an RFC 3339 (nano) timestamp at the start of line."""
    t = line.split(b" ", 1)[0].decode()
    whole, _, frac = t.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float("0." + (frac or "0"))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else None


class Reader:
    def __init__(self, lat, t0, chunked=False):
        self.buf, self.head, self.lat, self.t0 = b"", True, lat, t0
        self.chunked, self.raw = chunked, b""

    def dechunk(self):
        """Moves the whole chunks at the start of raw into buf (HTTP/1.1)."""
        while True:
            eol = self.raw.find(b"\r\n")
            if eol < 0:
                return
            size = int(self.raw[:eol], 16)
            if len(self.raw) < eol + 2 + size + 2:
                return
            self.buf += self.raw[eol + 2:eol + 2 + size]
            self.raw = self.raw[eol + 2 + size + 2:]

    def feed(self, data, now):
        if self.chunked and not self.head:
            self.raw += data
            self.dechunk()
        else:
            self.buf += data
        if self.head:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            if not self.buf.startswith(b"HTTP/1.") or b" 200 " not in self.buf[:16]:
                raise SystemExit("answer: %r" % self.buf[:1200])
            head, self.buf, self.head = self.buf[:end].lower(), self.buf[end + 4:], False
            if self.chunked == "auto":
                self.chunked = b"transfer-encoding: chunked" in head
            if self.chunked:
                self.raw, self.buf = self.buf, b""
                self.dechunk()
        *lines, self.buf = self.buf.split(b"\n")
        for l in lines:
            if l and now >= self.t0:
                self.lat.append((now - stamp(l)) * 1000.0)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for l in f:
            if l.startswith("VmRSS:"):
                return int(l.split()[1])
    return 0


def cpu_s(pid):
    """The process's CPU time (user + system), in seconds: a figure the machine's load (other
    processes) does not inflate, unlike latencies."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pump(sel, timeout):
    """Reads what the selector's sockets have; each Reader times its lines. A TLS socket keeps
    what OpenSSL decrypted, so each is read until it wants the socket again."""
    for key, _ in sel.select(timeout=timeout):
        while True:
            try:
                d = key.fileobj.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                break
            if not d:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                break
            key.data.feed(d, time.time())


def mark_steady(t):
    """Tells stream_bench.sh (STEADY_FILE) when the measured window begins."""
    if os.environ.get("STEADY_FILE"):
        with open(os.environ["STEADY_FILE"], "w") as f:
            f.write("%f\n" % t)


def steady(sel):
    """Reads (at most 120 s) until every stream has its answer's head, then starts the clock
    one second later: only lines from then on count. Returns that time."""
    deadline = time.time() + 120
    while any(k.data.head for k in sel.get_map().values()) and time.time() < deadline:
        pump(sel, 0.2)
    t0 = time.time() + 1.0
    for k in sel.get_map().values():
        k.data.t0 = t0
    mark_steady(t0)
    return t0


def direct(url, token, ca, n, seconds):
    host, port_path = url.split("://", 1)[1].split(":", 1)
    port, path = port_path.split("/", 1)
    ctx = ssl.create_default_context(cafile=ca)
    lat, lock, t_end, opened = [], threading.Lock(), time.time() + seconds, [0]
    t0 = time.time() + 1.0  # skip the tail and the connection's first second

    def one(i):
        s = ctx.wrap_socket(socket.create_connection((host, int(port))), server_hostname=host)
        p = "/" + path.replace("{i}", str(i % 10))
        s.sendall(("GET %s HTTP/1.0\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n" % (p, host, token)).encode())
        with lock:
            opened[0] += 1
            if opened[0] == n:
                mark_steady(time.time())
        mine, r = [], Reader(None, t0)
        r.lat = mine
        s.settimeout(0.5)
        while time.time() < t_end:
            try:
                d = s.recv(65536)
            except socket.timeout:
                continue
            if not d:
                break
            r.feed(d, time.time())
        s.close()
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(json.dumps({"lines": len(lat), "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99)}))


def straight(url, token, ca, n, seconds):
    """The load of gate() without fleetgate: the same N follows read kubesim straight, in one
    thread and one selector, each line parsed and timed the same way (the TLS records the loop
    decrypts through fleetgate are decrypted here). Runs SECONDS once all are open."""
    host, port_path = url.split("://", 1)[1].split(":", 1)
    port, path = port_path.split("/", 1)
    ctx = ssl.create_default_context(cafile=ca)
    sel, lat = selectors.DefaultSelector(), []
    t0 = time.time() + 3600.0
    for i in range(n):
        s = ctx.wrap_socket(socket.create_connection((host, int(port))), server_hostname=host)
        p = "/" + path.replace("{i}", str(i % 10))
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n"
                   % (p, host, token)).encode())
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, Reader(lat, t0, chunked="auto"))
    t0 = steady(sel)
    while time.time() < t0 + seconds:
        pump(sel, 0.2)
    print(json.dumps({"streams": n, "live_at_end": len(sel.get_map()), "lines": len(lat),
                      "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99)}))


# The follows through fleetgate speak HTTP/1.1 (chunked bodies, as kubectl and curl get them;
# fleetgate's loop writes those itself) unless STREAM_HTTP=1.0 (libmicrohttpd's resume path).
GATE_HTTP = os.environ.get("STREAM_HTTP", "1.1")


def gate(host, port, token, n, seconds, pidfile):
    pid = int(open(pidfile).read().strip())
    sel = selectors.DefaultSelector()
    lat = []
    rss0 = rss_kb(pid)
    t_open = time.time()
    socks = []
    for i in range(n):
        s = socket.create_connection((host, int(port)))
        p = "/v1/projects/demo/pods/web-%d/logs?follow=true&timestamps=true&tailLines=1" % (i % 10)
        s.sendall(("GET %s HTTP/%s\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n"
                   % (p, GATE_HTTP, host, token)).encode())
        s.setblocking(False)
        socks.append(s)
    t0 = time.time() + 3600.0  # no line counts until every stream has its answer's head
    for s in socks:
        sel.register(s, selectors.EVENT_READ, Reader(lat, t0, chunked=GATE_HTTP == "1.1"))
    # Steady state: every stream has its head (fleetgate and kubesim have done the TLS
    # handshakes and the 1,000 opens), then one more second.
    t0 = steady(sel)
    open_s = t0 - 1.0 - t_open
    t_end = t0 + seconds
    rss1, measured = None, False
    cpu0, lines0 = None, 0
    while time.time() < t_end:
        pump(sel, 0.2)
        if not measured and time.time() > t0 + 2:
            rss1, measured = rss_kb(pid), True
            cpu0, lines0 = cpu_s(pid), len(lat)
    cpu1, lines1 = cpu_s(pid), len(lat)
    rss2 = rss_kb(pid)
    live = len(sel.get_map())
    for s in socks:
        s.close()
    print(json.dumps({"streams": n, "live_at_end": live, "open_s": round(open_s, 2),
                      "lines": len(lat), "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99),
                      "rss_before_kb": rss0, "rss_open_kb": rss1, "rss_end_kb": rss2,
                      "rss_per_stream_kb": round(((rss1 or rss2) - rss0) / n, 1),
                      "cpu_us_per_line": round((cpu1 - cpu0) * 1e6 / max(1, lines1 - lines0), 1)
                      if cpu0 is not None else None}))


if sys.argv[1] == "straight":
    straight(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6]))
elif sys.argv[1] == "direct":
    direct(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6]))
else:
    gate(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), float(sys.argv[6]), sys.argv[7])
