// runtime/exec.ts: a process in a container over WebSocket, speaking the Kubernetes channel
// protocol (v5.channel.k8s.io, falling back to v4): every binary message starts with its channel
// byte (0 stdin, 1 stdout, 2 stderr, 3 status, 4 resize, 255 close, v5 only). The session hands
// stdout/stderr to callbacks, takes stdin and resizes, and resolves `done` with the exit code read
// from the status channel.
import WebSocket from 'ws';
import { ConnectionError, errorFromAnswer, FleetgateError } from './errors.js';

export interface ExecResult {
  /** 0 on Success; the NonZeroExitCode cause's value otherwise; -1 when it cannot be told. */
  exitCode: number;
  /** The Kubernetes Status sent on channel 3 (undefined when the stream ended without one). */
  status?: { status?: string; reason?: string; message?: string; details?: unknown };
  protocol: string;
}

export interface ExecHandlers {
  onStdout?: (b: Buffer) => void;
  onStderr?: (b: Buffer) => void;
}

export class ExecSession {
  readonly done: Promise<ExecResult>;
  protocol = '';
  requestId = '';
  private ws: WebSocket;

  constructor(url: string, headers: Record<string, string>, h: ExecHandlers) {
    this.ws = new WebSocket(url, ['v5.channel.k8s.io', 'v4.channel.k8s.io'], { headers });
    let status: ExecResult['status'];
    this.done = new Promise<ExecResult>((resolve, reject) => {
      this.ws.on('upgrade', (res) => {
        this.requestId = String(res.headers['x-request-id'] ?? '');
      });
      this.ws.on('open', () => { this.protocol = this.ws.protocol; });
      // A refused upgrade is a normal HTTP answer: its problem+json becomes the typed error.
      this.ws.on('unexpected-response', (req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown = text;
          try { body = JSON.parse(text); } catch { /* text */ }
          reject(errorFromAnswer(res.statusCode ?? 0, body, String(res.headers['x-request-id'] ?? '')));
          req.destroy();
        });
      });
      this.ws.on('message', (data: Buffer, isBinary: boolean) => {
        const buf = isBinary ? data : Buffer.from(data);
        if (buf.length < 1) return;
        const payload = buf.subarray(1);
        switch (buf[0]) {
          case 1: h.onStdout?.(payload); break;
          case 2: h.onStderr?.(payload); break;
          case 3:
            try { status = JSON.parse(payload.toString('utf8')); } catch { status = { message: payload.toString('utf8') }; }
            break;
          default: break;
        }
      });
      this.ws.on('close', () => resolve({ exitCode: exitCodeOf(status), status, protocol: this.protocol }));
      this.ws.on('error', (e) => {
        if (!(e instanceof FleetgateError)) reject(new ConnectionError(`exec: ${e.message}`, e));
      });
    });
    this.done.catch(() => {});
  }

  private send(channel: number, payload: Uint8Array) {
    const buf = Buffer.alloc(payload.length + 1);
    buf[0] = channel;
    buf.set(payload, 1);
    this.ws.send(buf, { binary: true });
  }

  /** Waits until the socket is open (or the session failed). */
  opened(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.ws.once('open', () => resolve());
      this.done.then(() => resolve(), reject);
    });
  }

  write(data: string | Uint8Array) {
    this.send(0, typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
  }

  resize(width: number, height: number) {
    this.send(4, Buffer.from(JSON.stringify({ Width: width, Height: height })));
  }

  /** End of input: v5 closes the stdin channel; v4 has no way but closing the socket. */
  closeStdin() {
    if (this.protocol === 'v5.channel.k8s.io') this.send(255, Uint8Array.of(0));
    else this.ws.close(1000);
  }

  close() {
    this.ws.close(1000);
  }
}

function exitCodeOf(s: ExecResult['status']): number {
  if (!s) return -1;
  if (s.status === 'Success') return 0;
  const causes = (s.details as { causes?: { reason?: string; message?: string }[] })?.causes ?? [];
  const c = causes.find((x) => x.reason === 'ExitCode');
  const n = c ? Number(c.message) : NaN;
  return Number.isInteger(n) ? n : 1;
}
