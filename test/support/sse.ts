/** One Server-Sent Event as a test client reads it. */
export interface SseEvent { event: string; id?: string; data: any } // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * Opens an SSE stream and collects its events as they come (`event`, `id`, JSON `data`; a block
 * without `event:` is a `message`); `closed` resolves when the server ends it, `close()` drops it.
 */
export async function openSseStream(url: string, headers: Record<string, string> = {}) {
  const abort = new AbortController();
  const res = await fetch(url, { headers, signal: abort.signal });
  const events: SseEvent[] = [];
  let resolveClosed!: () => void;
  const closed = new Promise<void>((r) => { resolveClosed = r; });
  if (res.status === 200) {
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let cut: number;
          while ((cut = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const e: SseEvent = { event: 'message', data: null };
            for (const line of block.split('\n')) {
              const [field, ...rest] = line.split(': ');
              if (field === 'event') e.event = rest.join(': ');
              else if (field === 'id') e.id = rest.join(': ');
              else if (field === 'data') e.data = JSON.parse(rest.join(': '));
            }
            events.push(e);
          }
        }
      } catch { /* aborted by the test */ }
      resolveClosed();
    })();
  } else resolveClosed();
  return { res, events, closed, close: () => abort.abort() };
}
