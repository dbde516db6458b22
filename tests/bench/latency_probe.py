#!/usr/bin/env python3
"""tests/bench/latency_probe.py URL SECONDS: one client calling GET URL back to back on one
keep-alive connection for SECONDS (as a health checker does), then one line: calls, p50, p99
and max latency in ms, and the statuses seen. Stops by itself; used by tests/bench/front_door.sh."""
import collections
import http.client
import sys
import time
import urllib.parse


def main():
    url = urllib.parse.urlsplit(sys.argv[1])
    seconds = float(sys.argv[2])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    lat, statuses = [], collections.Counter()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.perf_counter()
        try:
            conn.request("GET", url.path or "/")
            resp = conn.getresponse()
            resp.read()
            statuses[resp.status] += 1
        except (OSError, http.client.HTTPException):
            statuses["error"] += 1
            conn.close()
            conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    n = len(lat)
    print(f"{n} calls, p50 {lat[n // 2]:.2f}ms, p99 {lat[int(n * 0.99)]:.2f}ms, "
          f"max {lat[-1]:.1f}ms, statuses {dict(statuses)}")


if __name__ == "__main__":
    main()
