#!/usr/bin/env python3
"""tests/bench/slowloris.py HOST PORT CONNS SECONDS SRC [INTERVAL_S]: a bounded slowloris on
loopback, for tests/bench/front_door.sh. CONNS connections from the local address SRC each send a
request line, then one header line every INTERVAL_S seconds (default 5) and never end the head;
a connection the server closes is opened again after a short pause. Stops by itself after
SECONDS and prints one line: the most connections held open at once, how many the server closed,
and how many it refused."""
import asyncio
import sys
import time


async def attacker(host, port, src, interval, deadline, stats):
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, local_addr=(src, 0)), timeout=5)
        except (OSError, asyncio.TimeoutError):
            stats["refused"] += 1
            await asyncio.sleep(0.5)
            continue
        stats["open"] += 1
        stats["max_open"] = max(stats["max_open"], stats["open"])
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            await writer.drain()
            while time.monotonic() < deadline:
                try:
                    data = await asyncio.wait_for(reader.read(4096), timeout=interval)
                    if not data:
                        stats["closed"] += 1
                        break
                except asyncio.TimeoutError:
                    writer.write(b"X-Slow: 1\r\n")
                    await writer.drain()
        except OSError:
            stats["closed"] += 1
        finally:
            stats["open"] -= 1
            writer.close()
        await asyncio.sleep(0.5)


async def main():
    host, port, conns, seconds, src = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        float(sys.argv[4]), sys.argv[5]
    interval = float(sys.argv[6]) if len(sys.argv) > 6 else 5.0
    deadline = time.monotonic() + seconds
    stats = {"open": 0, "max_open": 0, "closed": 0, "refused": 0}
    await asyncio.gather(*(attacker(host, port, src, interval, deadline, stats)
                           for _ in range(conns)))
    print(f"slowloris: {conns} attackers from {src} for {seconds:.0f}s: at most "
          f"{stats['max_open']} connections open at once, {stats['closed']} closed by the "
          f"server, {stats['refused']} connects refused or timed out")


if __name__ == "__main__":
    asyncio.run(main())
