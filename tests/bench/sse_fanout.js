// tests/bench/sse_fanout.js: the change stream's fan-out, measured (tests/bench/insights_bench.sh).
//
//   node sse_fanout.js FG_URL TOKEN CLIENTS KS_URL KS_TOKEN KS_CA PER_MIN SECONDS
//
// Opens CLIENTS server-sent-event streams of project demo (kinds=App&app=web) on fleetgate, then
// PATCHes the Deployment web in kubesim PER_MIN times a minute for SECONDS, each write putting
// its send time (ms) into the label `t`. For each write, the latency is the time the LAST client
// received it minus its send time. Prints one JSON line: p50/p99 of that (ms), how many writes
// reached every client, clients still open at the end.
'use strict';
const http = require('http'), https = require('https'), fs = require('fs');
const [fgUrl, token, clientsArg, ksUrl, ksToken, ksCa, perMinArg, secondsArg] = process.argv.slice(2);
const CLIENTS = Number(clientsArg), PER_MIN = Number(perMinArg), SECONDS = Number(secondsArg);
const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS + 10 });

const last = new Map();   // t -> [receipts, latest receipt ms]
let open = 0, connected = 0;

function client() {
    const req = http.get(`${fgUrl}/v1/projects/demo/changes?kinds=App&app=web`,
        { agent, headers: { Authorization: `Bearer ${token}` } }, (res) => {
            if (res.statusCode !== 200) { console.error(`status ${res.statusCode}`); process.exit(1); }
            open++; connected++;
            let buf = '';
            res.setEncoding('utf8');
            res.on('data', (chunk) => {
                const now = Date.now();
                buf += chunk;
                let i;
                while ((i = buf.indexOf('\n\n')) >= 0) {
                    const ev = buf.slice(0, i);
                    buf = buf.slice(i + 2);
                    const m = /"t":"(\d+)"/.exec(ev);
                    if (!m) continue;
                    const r = last.get(m[1]) || [0, 0];
                    r[0]++;
                    r[1] = Math.max(r[1], now);
                    last.set(m[1], r);
                }
            });
            res.on('end', () => open--);
            res.on('error', () => open--);
        });
    req.on('error', (e) => { console.error(e.message); process.exit(1); });
}

const ksAgent = new https.Agent({ keepAlive: true, maxSockets: 8, ca: fs.readFileSync(ksCa) });
function patch(t) {
    return new Promise((resolve) => {
        const body = JSON.stringify({ metadata: { labels: { t: String(t) } } });
        const req = https.request(`${ksUrl}/apis/apps/v1/namespaces/demo/deployments/web`, {
            method: 'PATCH', agent: ksAgent,
            headers: { Authorization: `Bearer ${ksToken}`, 'Content-Type': 'application/merge-patch+json',
                       'Content-Length': Buffer.byteLength(body) },
        }, (res) => { res.resume(); res.on('end', resolve); });
        req.on('error', resolve);
        req.end(body);
    });
}

function pct(a, p) { return a.length ? a[Math.min(a.length - 1, Math.floor(a.length * p))] : NaN; }

(async () => {
    for (let i = 0; i < CLIENTS; i++) { client(); if (i % 100 === 99) await new Promise((r) => setTimeout(r, 50)); }
    const t0 = Date.now();
    while (connected < CLIENTS && Date.now() - t0 < 30000) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 1000));
    const sent = [];
    const interval = 60000 / PER_MIN, end = Date.now() + SECONDS * 1000;
    let next = Date.now();
    const inflight = new Set();
    while (Date.now() < end) {
        const t = Date.now();
        if (t < next) { await new Promise((r) => setTimeout(r, Math.min(next - t, 20))); continue; }
        next += interval;
        sent.push(t);
        const p = patch(t); inflight.add(p); p.then(() => inflight.delete(p));
        if (inflight.size >= 8) await Promise.race(inflight);
    }
    await Promise.all(inflight);
    await new Promise((r) => setTimeout(r, 3000));
    const lat = [];
    let complete = 0;
    for (const t of sent) {
        const r = last.get(String(t));
        if (r && r[0] >= CLIENTS) { complete++; lat.push(r[1] - t); }
    }
    lat.sort((a, b) => a - b);
    console.log(JSON.stringify({ clients: CLIENTS, connected, open_at_end: open, writes: sent.length,
        reached_all: complete, p50_ms: pct(lat, 0.5), p99_ms: pct(lat, 0.99) }));
    process.exit(0);
})();
