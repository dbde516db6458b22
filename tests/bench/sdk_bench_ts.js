// tests/bench/sdk_bench_ts.js: N GETs of one pod through the TypeScript SDK and through plain
// fetch (the reference, same process, same run); prints p50/p99 per call and the wall-time ratio.
'use strict';
const { Fleetgate } = require('../../build/sdk/typescript');
const N = Number(process.env.N || 10000);
const url = `${process.env.FLEETGATE_URL}/v1/projects/demo/pods/${process.env.POD}`;
const token = process.env.FG_TOKEN_ADMIN;
const pct = (a, p) => a.sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * p))];

async function timed(fn) {
  const lat = [];
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const s = performance.now();
    await fn();
    lat.push(performance.now() - s);
  }
  return { wall: performance.now() - t0, p50: pct(lat, 0.5), p99: pct(lat, 0.99) };
}

(async () => {
  const fg = new Fleetgate({ baseUrl: process.env.FLEETGATE_URL, token });
  const path = { project: 'demo', pod: process.env.POD };
  const plain = async () => {
    const r = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
    if (r.status !== 200) throw new Error(`plain: ${r.status}`);
    await r.json();
  };
  const viaSdk = async () => { await fg.ops.getPod({ path }); };
  await timed(plain); await timed(viaSdk); // warm both
  const a = await timed(plain);
  const b = await timed(viaSdk);
  console.log(`sdk_bench: ts  plain fetch p50 ${a.p50.toFixed(3)} ms p99 ${a.p99.toFixed(3)} ms | SDK p50 ${b.p50.toFixed(3)} ms p99 ${b.p99.toFixed(3)} ms | wall ratio SDK/plain ${(b.wall / a.wall).toFixed(2)}`);
})().catch((e) => { console.error(e); process.exit(1); });
