#!/usr/bin/python3
"""tests/bench/get_load.py URL TOKEN RATE SECONDS TAG [NAME=PID ...]: the API's requests of
tests/bench/stream_bench.sh, and what loaded the machine meanwhile.
tests/bench/get_load.py access LOG TAG CALLS: fleetgate's own time (durationMs of its access
lines in LOG) for the GETs tagged TAG, once CALLS of them are in (or after 10 s).

One keep-alive connection (as the SDKs keep theirs) sends GET URL at a steady RATE a second
for SECONDS, each due at start + i / RATE (a late one goes at once and is timed from when it
was sent; none is skipped). Each carries X-Request-Id TAG-<i>, so fleetgate's access lines of
these GETs (its own time for each, the server's view) can be picked out afterwards.

While it runs it reads the machine's CPU (/proc/stat) and that of each NAME=PID (/proc/PID/stat,
user + system), so the output says what loaded the two cores during the window: the processes
of the bench, itself, and the rest (other users of the machine).

Prints JSON: calls, errors, client-side p50/p99/max in ms, and the load."""
import http.client
import json
import os
import sys
import time
import urllib.parse

TICK = os.sysconf("SC_CLK_TCK")


def box_jiffies():
    """(busy, total) jiffies of all CPUs; and the CPU count."""
    with open("/proc/stat") as f:
        cpu = f.readline().split()[1:]
        ncpu = sum(1 for l in f if l.startswith("cpu"))
    vals = [int(x) for x in cpu[:8]]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals), ncpu


def proc_s(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except OSError:
        return None


def waits(pid):
    """{thread name: [ns on a CPU, ns waiting for one (runnable), timeslices]} summed over the
    threads of pid (/proc/PID/task/*/schedstat): how long fleetgate's threads stood in the run
    queue, which no client-side or server-side timing separates from the work itself."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for t in tids:
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                name = f.read().strip()
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                v = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            continue
        acc = out.setdefault(name, [0, 0, 0])
        for i in range(3):
            acc[i] += v[i]
    return out


def pct(xs, p):
    return xs[min(len(xs) - 1, int(len(xs) * p))] if xs else None


def main():
    url = urllib.parse.urlsplit(sys.argv[1])
    token, rate, seconds, tag = sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    procs = {}
    for a in sys.argv[6:]:
        name, _, pid = a.partition("=")
        procs[name] = int(pid)
    procs["get-client"] = os.getpid()
    path = url.path + ("?" + url.query if url.query else "")
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    lat, errors = [], 0
    busy0, total0, ncpu = box_jiffies()
    cpu0 = {n: proc_s(p) for n, p in procs.items()}
    load0 = open("/proc/loadavg").read().split()[0]
    fg = procs.get("fleetgate")
    w0 = waits(fg) if fg else {}
    start = time.monotonic()
    n = int(rate * seconds)
    for i in range(n):
        due = start + i / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        t = time.perf_counter()
        try:
            conn.request("GET", path, headers={"Authorization": "Bearer " + token,
                                               "X-Request-Id": "%s-%d" % (tag, i)})
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                errors += 1
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
            continue
        lat.append((time.perf_counter() - t) * 1000)
    wall = time.monotonic() - start
    busy1, total1, _ = box_jiffies()
    w1 = waits(fg) if fg else {}
    cpu1 = {n: proc_s(p) for n, p in procs.items()}
    # cores busy: jiffies of all CPUs over wall time
    cores = lambda j: j / TICK / wall
    load = {n: round((cpu1[n] - cpu0[n]) / wall, 3) for n in procs
            if cpu0[n] is not None and cpu1[n] is not None}
    box = cores(busy1 - busy0)
    load["rest of the machine"] = round(max(0.0, box - sum(load.values())), 3)
    lat.sort()
    print(json.dumps({"calls": len(lat), "errors": errors, "rate": round(len(lat) / wall, 1),
                      "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99),
                      "max_ms": lat[-1] if lat else None,
                      "box_cores_busy": round(box, 3), "ncpu": ncpu, "loadavg_before": load0,
                      "cores_by_process": load,
                      # per GET: how long fleetgate's threads of each name waited for a core
                      # (runnable, not running) and ran, in us; MHD-worker serves the GETs
                      "fleetgate_wait_us_per_get": {
                          n: round((w1[n][1] - w0[n][1]) / 1000 / max(1, len(lat)), 1)
                          for n in w1 if n in w0},
                      "fleetgate_run_us_per_get": {
                          n: round((w1[n][0] - w0[n][0]) / 1000 / max(1, len(lat)), 1)
                          for n in w1 if n in w0}}))


def access(log, tag, calls):
    """fleetgate's access lines carry durationMs: from the request's head read to the answer
    handed to the socket, the server's view of each GET (no client scheduling in it)."""
    want = '"requestId":"%s-' % tag
    deadline = time.monotonic() + 10
    while True:
        ms = []
        with open(log, errors="replace") as f:
            for l in f:
                if want in l and '"msg":"access"' in l:
                    ms.append(json.loads(l)["durationMs"])
        if len(ms) >= calls or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # the access log is written in batches
    ms.sort()
    print(json.dumps({"lines": len(ms), "p50_ms": pct(ms, 0.5), "p99_ms": pct(ms, 0.99),
                      "max_ms": ms[-1] if ms else None}))


if __name__ == "__main__":
    if sys.argv[1] == "access":
        access(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
