#!/usr/bin/python3
"""Exec round trips (tests/bench/exec_bench.sh runs it): one WebSocket exec of `cat` (v5, stdin
and stdout), then N times: send one stdin byte (channel 0) and wait for it to come back on
stdout (channel 1). Debian's python3-websocket. Usage:
  exec_rtt.py URL TOKEN CA|- N
Prints JSON: round trips, p50 and p99 in ms."""
import json
import ssl
import sys
import time
import urllib.parse

import websocket


def main():
    url, token, ca, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    q = urllib.parse.urlencode([("command", "cat"), ("stdin", "true"), ("stdout", "true")])
    sslopt = {"cert_reqs": ssl.CERT_NONE} if ca == "-" else {"ca_certs": ca}
    ws = websocket.create_connection(url + "?" + q, header=["Authorization: Bearer " + token],
                                     subprotocols=["v5.channel.k8s.io"], sslopt=sslopt,
                                     timeout=10)
    rtts = []
    for i in range(n + 20):
        b = bytes([0x61 + i % 26])
        t = time.perf_counter()
        ws.send_binary(b"\x00" + b)
        got = b""
        while b not in got:
            op, data = ws.recv_data()
            if data and data[0] == 1:
                got += data[1:]
        if i >= 20:  # the first ones warm up
            rtts.append((time.perf_counter() - t) * 1000)
    ws.send_binary(b"\xff\x00")
    ws.close()
    rtts.sort()
    print(json.dumps({"round_trips": len(rtts), "p50_ms": rtts[len(rtts) // 2],
                      "p99_ms": rtts[int(len(rtts) * 0.99)]}))


main()
