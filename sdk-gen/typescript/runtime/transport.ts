// runtime/transport.ts: the one place every request of the SDK goes through (a fetch function the
// generated client is given). It adds the bearer token from a provider (refreshed once on a 401),
// a request id, and retries with exponential backoff and full jitter on 429/502/503/504 and on
// connection errors, honouring Retry-After, but only for safe methods or for writes carrying an
// Idempotency-Key (a retried write without one might be applied twice). Each call's outcome
// (request id, status, attempts, duration) goes to the caller's onCall hook and is kept for the
// Response (callInfo(response)).
import { randomBytes } from 'node:crypto';
import { ConnectionError } from './errors.js';

/** Returns a bearer token; `forceRefresh` after the server refused the last one (401). */
export type TokenProvider = (opts: { forceRefresh: boolean }) => string | Promise<string>;

export interface RetryOptions {
  /** Attempts in all, the first included (default 4; 1 turns retries off). */
  maxAttempts?: number;
  /** The first backoff's ceiling (default 100 ms); doubled each retry. */
  baseDelayMs?: number;
  /** No backoff exceeds this (default 5000 ms). */
  maxDelayMs?: number;
  /** A Retry-After longer than this is not waited for: the error is returned (default 30 s). */
  maxRetryAfterMs?: number;
  /** Statuses retried (default 429, 502, 503, 504). */
  statuses?: number[];
}

/** What one call did, for the caller's logs and metrics. */
export interface CallInfo {
  method: string;
  url: string;
  /** The final status; 0 when no answer came. */
  status: number;
  /** The answer's X-Request-Id (the one sent when the answer had none). */
  requestId: string;
  attempts: number;
  /** From the first attempt's start to the final answer's headers. */
  durationMs: number;
  /** Why each earlier attempt was retried ("503", "429", "ECONNREFUSED"...). */
  retried: string[];
}

export interface TransportOptions {
  token?: TokenProvider;
  retry?: RetryOptions;
  onCall?: (info: CallInfo) => void;
  fetch?: typeof fetch;
  userAgent?: string;
  /** Tests replace the sleep to observe delays. */
  sleep?: (ms: number) => Promise<void>;
}

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);
const infos = new WeakMap<Response, CallInfo>();

/** The CallInfo of a Response that came through the transport. */
export function callInfo(r: Response | undefined): CallInfo | undefined {
  return r ? infos.get(r) : undefined;
}

export function newRequestId(): string {
  return randomBytes(8).toString('hex');
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date; undefined when absent or bad. */
export function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  if (!v) return undefined;
  if (/^\s*\d+\s*$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}

/** Full jitter (AWS architecture blog): a uniform wait in [0, min(cap, base * 2^retry)). */
export function backoffMs(retry: number, base: number, cap: number): number {
  return Math.random() * Math.min(cap, base * 2 ** retry);
}

function errorCode(e: unknown): string {
  type Coded = { code?: string; message?: string; cause?: Coded; errors?: Coded[] };
  const x = e as Coded;
  const c = x?.cause?.code ?? x?.cause?.errors?.[0]?.code ?? x?.code;
  return c ?? x?.cause?.message ?? (e instanceof Error ? e.message : 'error');
}

export function makeTransport(opts: TransportOptions): typeof fetch {
  const base = opts.fetch ?? globalThis.fetch;
  const r = opts.retry ?? {};
  const maxAttempts = Math.max(1, r.maxAttempts ?? 4);
  const baseDelay = r.baseDelayMs ?? 100;
  const maxDelay = r.maxDelayMs ?? 5000;
  const maxRetryAfter = r.maxRetryAfterMs ?? 30000;
  const statuses = new Set(r.statuses ?? [429, 502, 503, 504]);
  const sleep = opts.sleep ?? ((ms: number) => new Promise<void>((res) => setTimeout(res, ms)));

  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const req = new Request(input as RequestInfo, init);
    const method = req.method.toUpperCase();
    const headers = new Headers(req.headers);
    if (!headers.has('X-Request-Id')) headers.set('X-Request-Id', newRequestId());
    if (opts.userAgent && !headers.has('User-Agent')) headers.set('User-Agent', opts.userAgent);
    const retriable = SAFE.has(method) || headers.has('Idempotency-Key');
    // The body is read once and re-sent on every attempt.
    const body = method === 'GET' || method === 'HEAD' ? undefined : await req.arrayBuffer();
    const started = performance.now();
    const retried: string[] = [];
    let refreshed = false;
    for (let attempt = 1; ; attempt++) {
      if (opts.token) {
        const t = await opts.token({ forceRefresh: refreshed && retried.at(-1) === '401' });
        if (t) headers.set('Authorization', `Bearer ${t}`);
      }
      let res: Response | undefined;
      let failure: unknown;
      try {
        res = await base(req.url, { method, headers, body, signal: req.signal, redirect: 'manual' });
      } catch (e) {
        failure = e;
      }
      const last = attempt >= maxAttempts;
      if (res) {
        // A refused token is refreshed and the call repeated once, whatever the method: a 401
        // means the server did nothing.
        if (res.status === 401 && opts.token && !refreshed) {
          refreshed = true;
          retried.push('401');
          await res.body?.cancel();
          continue;
        }
        const wait = parseRetryAfter(res.headers.get('Retry-After'));
        if (!last && retriable && statuses.has(res.status) &&
            (wait === undefined || wait <= maxRetryAfter)) {
          retried.push(String(res.status));
          await res.body?.cancel();
          await sleep(wait ?? backoffMs(retried.length - 1, baseDelay, maxDelay));
          continue;
        }
        const info: CallInfo = {
          method, url: req.url, status: res.status,
          requestId: res.headers.get('X-Request-Id') ?? headers.get('X-Request-Id') ?? '',
          attempts: attempt, durationMs: performance.now() - started, retried,
        };
        infos.set(res, info);
        opts.onCall?.(info);
        return res;
      }
      if (req.signal.aborted || last || !retriable) {
        const info: CallInfo = {
          method, url: req.url, status: 0, requestId: headers.get('X-Request-Id') ?? '',
          attempts: attempt, durationMs: performance.now() - started, retried,
        };
        opts.onCall?.(info);
        throw new ConnectionError(`${method} ${req.url}: ${errorCode(failure)} after ${attempt} attempt(s)`,
          failure);
      }
      retried.push(errorCode(failure));
      await sleep(backoffMs(retried.length - 1, baseDelay, maxDelay));
    }
  };
}

/** A provider that always gives the same token. */
export function staticToken(token: string): TokenProvider {
  return () => token;
}

/** The `exp` claim of a JWT, in ms since the epoch (undefined when it has none or is no JWT). */
export function jwtExpiry(token: string): number | undefined {
  const part = token.split('.')[1];
  if (!part) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
    return typeof claims.exp === 'number' ? claims.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A refreshable provider around `fetchToken` (a command, an OAuth call...): the token is kept
 * until `skewMs` before its JWT expiry (or `ttlMs` when it is not a JWT), fetched again after a
 * 401, and concurrent callers share one fetch.
 */
export function refreshingToken(fetchToken: () => string | Promise<string>,
                                { skewMs = 30000, ttlMs = 300000 } = {}): TokenProvider {
  let token = '';
  let until = 0;
  let pending: Promise<string> | undefined;
  return async ({ forceRefresh }) => {
    if (!forceRefresh && token && Date.now() < until) return token;
    pending ??= (async () => {
      try {
        const t = (await fetchToken()).trim();
        const exp = jwtExpiry(t);
        token = t;
        until = exp !== undefined ? exp - skewMs : Date.now() + ttlMs;
        return t;
      } finally {
        pending = undefined;
      }
    })();
    return pending;
  };
}
