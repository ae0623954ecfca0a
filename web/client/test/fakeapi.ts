// A scripted Sessions API for the transport's tests: an output log of parts with seqs,
// served as the real stream serves it (each part followed by its data-resume-cursor,
// ending after a finish that ends a response, once caught up), and the routes the
// transport calls, recorded.

export interface Call {
  method: string;
  path: string;
  body: unknown;
  headers: Record<string, string>;
}

export class FakeApi {
  log: unknown[] = [];
  calls: Call[] = [];
  held = 0;
  openResponses = 0;
  /** Answers for POST /inputs, in order; a function may throw to simulate the network. */
  onInput: (body: { content: string; client_message_id: string }) => unknown = (b) => ({
    session_id: 's-1',
    input_id: 'in-' + b.client_message_id,
    client_message_id: b.client_message_id,
    accepted_at: '2026-01-01T00:00:00Z',
    state: 'pending',
    duplicate: false,
    failure: null,
    output_seq: this.log.length,
  });
  onAnswer: (interactionId: string, body: unknown) => void = () => {};

  append(...parts: unknown[]) {
    this.log.push(...parts);
  }

  fetch = async (input: RequestInfo | URL, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(String(input), 'http://api.test');
    const method = init.method ?? 'GET';
    const body = typeof init.body === 'string' ? JSON.parse(init.body) : undefined;
    this.calls.push({ method, path: url.pathname + url.search, body, headers: { ...(init.headers as Record<string, string>) } });
    const path = url.pathname.replace('/api/v1/sessions/s-1', '');
    if (method === 'POST' && path === '/inputs') return ok(this.onInput(body));
    if (method === 'POST' && path.startsWith('/interactions/')) {
      this.onAnswer(path.split('/')[2]!, body);
      return ok({});
    }
    if (method === 'POST' && path === '/interrupt') {
      return json(409, { code: 'PENDING_INPUTS_NOT_CANCELLED', message: 'no response is open; 1 input is held', data: { input_ids: ['in-1'] } });
    }
    if (method === 'GET' && path === '') {
      return ok({ session_id: 's-1', output_seq: this.log.length, current_responses: Array(this.openResponses).fill({}), held_inputs: Array(this.held).fill({}) });
    }
    if (method === 'GET' && path === '/stream') return this.stream(Number(url.searchParams.get('after_seq') ?? 0));
    return json(404, { code: 'NOT_FOUND', message: 'route ' + url.pathname, data: null });
  };

  private stream(after: number): Response {
    const lines: string[] = [];
    for (let seq = after + 1; seq <= this.log.length; seq++) {
      const part = this.log[seq - 1] as { type: string; finishReason?: string };
      lines.push(`data: ${JSON.stringify(part)}\n\n`);
      lines.push(`data: ${JSON.stringify({ type: 'data-resume-cursor', id: 'resume-cursor', data: { seq }, transient: true })}\n\n`);
      if (part.type === 'finish' && part.finishReason !== 'tool-calls' && seq === this.log.length) break;
    }
    lines.push(': keep-alive\n\n', 'data: [DONE]\n\n');
    const enc = new TextEncoder();
    return new Response(
      new ReadableStream({
        start(c) {
          for (const l of lines) c.enqueue(enc.encode(l));
          c.close();
        },
      }),
      { status: 200, headers: { 'Content-Type': 'text/event-stream' } },
    );
  }
}

const json = (status: number, env: unknown) => new Response(JSON.stringify(env), { status, headers: { 'Content-Type': 'application/json' } });
const ok = (data: unknown) => json(200, { code: 'OK', message: 'ok', data });

/** The parts of one text response. */
export function textResponse(id: string, words: string[], finishReason = 'stop'): unknown[] {
  return [
    { type: 'start', messageId: id, messageMetadata: { response_id: id } },
    { type: 'text-start', id: id + ':t' },
    ...words.map((w) => ({ type: 'text-delta', id: id + ':t', delta: w })),
    { type: 'text-end', id: id + ':t' },
    { type: 'finish', finishReason, messageMetadata: { outcome: finishReason === 'stop' ? 'completed' : 'cancelled' } },
  ];
}
