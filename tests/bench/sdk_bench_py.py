"""tests/bench/sdk_bench_py.py: N GETs of one pod through the Python SDK and through a plain
httpx.Client (the reference, same process, same run); p50/p99 per call and the wall-time ratio."""
import os
import sys
import time

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../build/sdk/python"))
from fleetgate_sdk import Fleetgate  # noqa: E402

N = int(os.environ.get("N", "10000"))
base, token, pod = os.environ["FLEETGATE_URL"], os.environ["FG_TOKEN_ADMIN"], os.environ["POD"]


def timed(fn):
    lat = []
    t0 = time.perf_counter()
    for _ in range(N):
        s = time.perf_counter()
        fn()
        lat.append((time.perf_counter() - s) * 1000)
    lat.sort()
    return time.perf_counter() - t0, lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]


plain_client = httpx.Client(base_url=base, headers={"Authorization": "Bearer " + token})


def plain():
    r = plain_client.get("/v1/projects/demo/pods/" + pod)
    assert r.status_code == 200
    r.json()


fg = Fleetgate(base, token=token)
sdk = lambda: fg.get_pod("demo", pod)  # noqa: E731
timed(plain), timed(sdk)
a, b = timed(plain), timed(sdk)
print("sdk_bench: py  plain httpx p50 %.3f ms p99 %.3f ms | SDK p50 %.3f ms p99 %.3f ms | wall ratio SDK/plain %.2f"
      % (a[1], a[2], b[1], b[2], b[0] / a[0]))
