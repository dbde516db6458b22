// runtime/streams.ts: reading long answers. Logs are a chunked text body read line by line;
// the change stream is server-sent events (text/event-stream), parsed here (the WHATWG rules:
// fields id/event/data/retry, comments, blank line ends an event) and resumed with Last-Event-ID
// after a disconnection, so a caller iterating over changes misses none.

/** The lines of a byte stream (a line's "\n" or "\r\n" removed; a last unterminated line kept). */
export async function* readLines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buf = '';
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        yield line.endsWith('\r') ? line.slice(0, -1) : line;
      }
    }
    buf += decoder.decode();
    if (buf) yield buf;
  } finally {
    reader.releaseLock();
    await body.cancel().catch(() => {});
  }
}

/** One server-sent event. */
export interface SseEvent {
  id: string;
  event: string;
  data: string;
}

/** Parses an event stream; `onRetry` receives each `retry:` value (ms). */
export async function* parseSse(body: ReadableStream<Uint8Array>,
                                onRetry?: (ms: number) => void): AsyncGenerator<SseEvent> {
  let id = '';
  let event = '';
  let data: string[] = [];
  for await (const line of readLines(body)) {
    if (line === '') {
      if (data.length) yield { id, event: event || 'message', data: data.join('\n') };
      event = '';
      data = [];
      continue;
    }
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id' && !value.includes('\0')) id = value;
    else if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
    else if (field === 'retry' && /^\d+$/.test(value)) onRetry?.(Number(value));
  }
}
