// tests/sdk/ts_ratelimit_test.js: fleetgate's own rate limiter answers 429 with Retry-After
// (stack.sh with SDK_READ_PER_MINUTE=120 SDK_READ_BURST=2); the SDK waits as told and every call
// succeeds. Run by `make sdk-test-ts`.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { Fleetgate, RateLimitedError } = require('../../build/sdk/typescript');

test('429 from fleetgate: Retry-After honoured, then success', async () => {
  const infos = [];
  const waits = [];
  const fg = new Fleetgate({ baseUrl: process.env.FLEETGATE_URL, token: process.env.FG_TOKEN_ADMIN,
    onCall: (i) => infos.push(i),
    sleep: (ms) => { waits.push(ms); return new Promise((r) => setTimeout(r, ms)); } });
  for (let i = 0; i < 6; i++) {
    const r = await fg.ops.getWhoami();
    assert.equal(r.status, 200);
  }
  const retried = infos.flatMap((i) => i.retried);
  assert.ok(retried.includes('429'), `no 429 was retried: ${JSON.stringify(infos)}`);
  assert.ok(waits.length > 0 && waits.every((w) => w >= 1000 && w % 1000 === 0), `Retry-After waits: ${waits}`);
  // without retries the same limit is a typed error carrying Retry-After
  const once = new Fleetgate({ baseUrl: process.env.FLEETGATE_URL, token: process.env.FG_TOKEN_ADMIN, retry: { maxAttempts: 1 } });
  let e;
  for (let i = 0; i < 5 && !e; i++) e = await once.ops.getWhoami().then(() => undefined, (x) => x);
  assert.ok(e instanceof RateLimitedError, String(e));
  assert.ok(e.retryAfterMs >= 1000);
});
