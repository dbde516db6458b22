// runtime/client.ts: Fleetgate, the SDK's entry point. It owns a generated client (gen/) whose
// fetch is the transport (auth, retries, request ids, timing), and offers every generated
// operation as `fg.ops.<operationId>(options)`, each answering a Result (data, status, ETag,
// request id, duration, attempts) or throwing a typed FleetgateError. On top: pagination over
// `cursor`, an optional ETag cache (If-None-Match, 304 answered from it), log lines, the change
// stream with Last-Event-ID resume, and exec. Nothing here names an operation's parameters: they
// are the generated types', so an operation added to the spec is there after `make sdk`.
import { randomUUID } from 'node:crypto';
import * as sdk from '../gen/sdk.gen.js';
import { createClient, createConfig, type Client } from '../gen/client/index.js';
import { ConnectionError, errorFromAnswer, FleetgateError } from './errors.js';
import { ExecSession, type ExecHandlers } from './exec.js';
import { parseSse, readLines } from './streams.js';
import {
  callInfo, newRequestId, parseRetryAfter, refreshingToken, staticToken, makeTransport,
  type TokenProvider, type TransportOptions,
} from './transport.js';
import { operations, SPEC_VERSION } from '../meta.gen.js';

export interface FleetgateOptions extends Omit<TransportOptions, 'token'> {
  /** Default: $FLEETGATE_URL, else http://127.0.0.1:8080. */
  baseUrl?: string;
  /** A token or a provider; default: $FLEETGATE_TOKEN. */
  token?: string | TokenProvider;
  /** Keep GET answers with their ETag and revalidate them with If-None-Match. */
  etagCache?: boolean | { maxEntries?: number };
}

/** What a call answered, with what the caller's logs and metrics need. */
export interface Result<T> {
  data: T;
  status: number;
  headers: Headers;
  etag?: string;
  requestId: string;
  durationMs: number;
  attempts: number;
  /** 304: the caller's If-None-Match (or the cache's) still matches; data is the cached copy, if any. */
  notModified: boolean;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyOp = (options: any) => Promise<any>;
type DataOf<F extends AnyOp> =
  Awaited<ReturnType<F>> extends infer R ? (R extends { data: infer D } ? Exclude<D, undefined> : never) : never;
type OptionsOf<F extends AnyOp> = Omit<NonNullable<Parameters<F>[0]>, 'client' | 'throwOnError'>;
type SdkOps = { [K in keyof typeof sdk as (typeof sdk)[K] extends AnyOp ? K : never]: (typeof sdk)[K] };
export type OperationId = keyof SdkOps & string;
export type OpOptions<K extends OperationId> = OptionsOf<SdkOps[K]>;
export type OpData<K extends OperationId> = DataOf<SdkOps[K]>;
/** Every operation of the spec, by operationId. */
export type Ops = { [K in OperationId]: (options?: OpOptions<K>) => Promise<Result<OpData<K>>> };

type ItemOf<D> = D extends { items: Array<infer I> } ? I : never;
type ListOps = { [K in OperationId]: OpData<K> extends { items: unknown[]; cursor?: unknown } ? K : never }[OperationId];

export interface LogStream extends AsyncIterable<string> {
  requestId: string;
  close(): void;
}

export interface ChangeEvent {
  /** The SSE id: pass it back as lastEventId to resume after it. */
  id: string;
  type: string;
  kind?: string;
  name?: string;
  object?: unknown;
  [key: string]: unknown;
}

export interface ChangeStream extends AsyncIterable<ChangeEvent> {
  /** The id of the last event delivered. */
  readonly lastEventId: string;
  /** How many times the stream was opened (1 + reconnections). */
  readonly connections: number;
  close(): void;
}

function hasHeader(h: Record<string, unknown>, name: string): boolean {
  const n = name.toLowerCase();
  return Object.keys(h).some((k) => k.toLowerCase() === n && h[k] !== undefined);
}

export class Fleetgate {
  static readonly version = SPEC_VERSION;
  readonly baseUrl: string;
  readonly client: Client;
  readonly ops: Ops;
  private readonly token?: TokenProvider;
  private readonly fetchFn: typeof fetch;
  private readonly etags?: Map<string, { etag: string; data: unknown }>;
  private readonly etagMax: number;

  constructor(o: FleetgateOptions = {}) {
    this.baseUrl = (o.baseUrl ?? process.env.FLEETGATE_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
    const t = o.token ?? process.env.FLEETGATE_TOKEN;
    this.token = typeof t === 'string' ? staticToken(t) : t;
    this.fetchFn = makeTransport({ ...o, token: this.token, userAgent: o.userAgent ?? `fleetgate-sdk-ts/${SPEC_VERSION}` });
    this.client = createClient(createConfig({ baseUrl: this.baseUrl, fetch: this.fetchFn }));
    if (o.etagCache) {
      this.etags = new Map();
      this.etagMax = typeof o.etagCache === 'object' ? o.etagCache.maxEntries ?? 1000 : 1000;
    } else {
      this.etagMax = 0;
    }
    const ops: Record<string, unknown> = {};
    for (const name of Object.keys(operations)) {
      if (typeof (sdk as Record<string, unknown>)[name] === 'function') {
        ops[name] = (options?: object) => this.call(name as OperationId, options as never);
      }
    }
    this.ops = ops as Ops;
  }

  /** A provider that runs `fetchToken` and keeps its answer until the token nears expiry. */
  static refreshingToken = refreshingToken;

  /** Calls one operation by its operationId. */
  async call<K extends OperationId>(name: K, options?: OpOptions<K>): Promise<Result<OpData<K>>> {
    const op = operations[name];
    const fn = (sdk as unknown as Record<string, AnyOp>)[name];
    if (!op || !fn) throw new Error(`fleetgate: no operation ${name} in the spec`);
    const o = { ...(options ?? {}) } as Record<string, unknown>;
    const headers: Record<string, unknown> = { ...((o.headers as Record<string, unknown>) ?? {}) };
    if (op.idempotencyKey && !hasHeader(headers, 'Idempotency-Key')) headers['Idempotency-Key'] = randomUUID();
    let cacheKey = '';
    if (this.etags && op.method === 'GET') {
      cacheKey = this.client.buildUrl({ url: op.path, path: o.path, query: o.query } as never);
      const hit = this.etags.get(cacheKey);
      if (hit && !hasHeader(headers, 'If-None-Match')) headers['If-None-Match'] = hit.etag;
    }
    o.headers = headers;
    const r = await fn({ ...o, client: this.client, throwOnError: false });
    const res: Response | undefined = r?.response;
    if (!res) throw r?.error instanceof Error ? r.error : new ConnectionError(`${name}: no answer`, r?.error);
    const info = callInfo(res);
    const base = {
      status: res.status, headers: res.headers, etag: res.headers.get('ETag') ?? undefined,
      requestId: info?.requestId ?? res.headers.get('X-Request-Id') ?? '',
      durationMs: info?.durationMs ?? 0, attempts: info?.attempts ?? 1,
    };
    if (res.status === 304) {
      const hit = cacheKey ? this.etags!.get(cacheKey) : undefined;
      return { ...base, data: hit?.data as OpData<K>, notModified: true };
    }
    if (!res.ok) {
      throw errorFromAnswer(res.status, r.error, base.requestId, parseRetryAfter(res.headers.get('Retry-After')),
        new URL(res.url || this.baseUrl).pathname);
    }
    if (cacheKey && base.etag) {
      this.etags!.delete(cacheKey);
      this.etags!.set(cacheKey, { etag: base.etag, data: r.data });
      if (this.etags!.size > this.etagMax) this.etags!.delete(this.etags!.keys().next().value as string);
    }
    return { ...base, data: r.data as OpData<K>, notModified: false };
  }

  /** Every item of a list operation, page after page (`cursor`), fetched as the caller iterates. */
  async *paginate<K extends ListOps>(name: K, options?: OpOptions<K>): AsyncGenerator<ItemOf<OpData<K>>> {
    for await (const page of this.pages(name, options)) {
      for (const item of (page.data as { items: ItemOf<OpData<K>>[] }).items) yield item;
    }
  }

  /** The pages of a list operation, each as its Result. */
  async *pages<K extends ListOps>(name: K, options?: OpOptions<K>): AsyncGenerator<Result<OpData<K>>> {
    const o = { ...(options ?? {}) } as Record<string, unknown>;
    let cursor: string | undefined = (o.query as { cursor?: string } | undefined)?.cursor;
    for (;;) {
      const query = { ...((o.query as object) ?? {}), ...(cursor ? { cursor } : {}) };
      const page = await this.call(name, { ...o, query } as never) as Result<OpData<K>>;
      yield page;
      const next = (page.data as { cursor?: string | null }).cursor;
      if (!next) return;
      cursor = next;
    }
  }

  private async openStream(name: OperationId, options: object, signal: AbortSignal,
                           extraHeaders: Record<string, string> = {}): Promise<Response> {
    const op = operations[name];
    const o = options as Record<string, unknown>;
    const r = await this.client.get({
      url: op.path, path: o.path, query: o.query, parseAs: 'stream', signal,
      headers: { ...((o.headers as object) ?? {}), ...extraHeaders },
    } as never) as { response?: Response; error?: unknown };
    const res = r.response;
    if (!res) throw r.error instanceof Error ? r.error : new ConnectionError(`${name}: no answer`, r.error);
    if (!res.ok) {
      throw errorFromAnswer(res.status, r.error, callInfo(res)?.requestId ?? '',
        parseRetryAfter(res.headers.get('Retry-After')), new URL(res.url || this.baseUrl).pathname);
    }
    return res;
  }

  private async lineStream(name: OperationId, options: object): Promise<LogStream> {
    const ac = new AbortController();
    const res = await this.openStream(name, options, ac.signal);
    const lines = readLines(res.body!);
    return {
      requestId: callInfo(res)?.requestId ?? '',
      close: () => ac.abort(),
      [Symbol.asyncIterator]: async function* () {
        try {
          yield* lines;
        } catch (e) {
          if (!ac.signal.aborted) throw e;
        }
      },
    };
  }

  /** A container's log, line by line (`query.follow` keeps it open). */
  podLogs(options: OpOptions<'getPodLogs'>): Promise<LogStream> {
    return this.lineStream('getPodLogs', options);
  }

  /** Every pod of an app, lines prefixed [cluster/pod]. */
  appLogs(options: OpOptions<'getAppLogs'>): Promise<LogStream> {
    return this.lineStream('getAppLogs', options);
  }

  /**
   * The project's change stream. After a disconnection it reconnects (after the stream's
   * `retry`, or `reconnectDelayMs`) with the Last-Event-ID of the last event delivered, so
   * nothing is missed; a 4xx answer ends it with the typed error.
   */
  changes(options: OpOptions<'watchChanges'> & { lastEventId?: string; reconnectDelayMs?: number }): ChangeStream {
    const ac = new AbortController();
    let lastEventId = options.lastEventId ?? '';
    let connections = 0;
    let retryMs = options.reconnectDelayMs ?? 3000;
    const self = this;
    const stream = {
      get lastEventId() { return lastEventId; },
      get connections() { return connections; },
      close: () => ac.abort(),
      [Symbol.asyncIterator]: async function* (): AsyncGenerator<ChangeEvent> {
        while (!ac.signal.aborted) {
          try {
            connections++;
            const res = await self.openStream('watchChanges', options, ac.signal,
              lastEventId ? { 'Last-Event-ID': lastEventId } : {});
            for await (const ev of parseSse(res.body!, (ms) => { if (options.reconnectDelayMs === undefined) retryMs = ms; })) {
              let data: Record<string, unknown> = {};
              try { data = JSON.parse(ev.data); } catch { data = { raw: ev.data }; }
              if (ev.id) lastEventId = ev.id;
              yield { type: ev.event, ...data, id: ev.id };
            }
          } catch (e) {
            if (ac.signal.aborted) return;
            if (e instanceof FleetgateError && e.status < 500 && e.status !== 429) throw e;
          }
          if (ac.signal.aborted) return;
          await new Promise((res) => setTimeout(res, retryMs));
        }
      },
    };
    return stream;
  }

  /** Runs a command in a container over WebSocket (v5.channel.k8s.io, v4 as fallback). */
  async exec(options: OpOptions<'execPod'>, handlers: ExecHandlers = {}): Promise<ExecSession> {
    const op = operations.execPod;
    const o = options as unknown as { path: object; query: object; headers?: Record<string, string> };
    const url = this.client.buildUrl({ url: op.path, path: o.path, query: o.query, baseUrl: this.baseUrl } as never)
      .replace(/^http/, 'ws');
    const headers: Record<string, string> = { 'X-Request-Id': newRequestId(), ...(o.headers ?? {}) };
    if (this.token) headers.Authorization = `Bearer ${await this.token({ forceRefresh: false })}`;
    const s = new ExecSession(url, headers, handlers);
    await s.opened();
    return s;
  }
}
