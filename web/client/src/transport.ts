import { isToolUIPart, parseJsonEventStream, uiMessageChunkSchema } from 'ai';
import type { ChatTransport, UIMessage, UIMessageChunk } from 'ai';
import { ApiError, SharedClient, SessionsClient, readEnvelope } from './api';
import type { InputReceipt, MessagePage, SessionDetails } from './types';

/**
 * Where a conversation's stream stands, as the transport last saw it. `cursor` is the
 * last seq a data-resume-cursor confirmed; `messageStart`, while a response is open, the
 * cursor just before that response's first `start` (the messages page's replay_seq).
 */
export interface StreamPosition {
  cursor: number;
  messageStart: number | null;
}

export interface SessionTransportOptions {
  sessionId: string;
  /** The signed-in user's client; absent for a share link's read-only view. */
  client?: SessionsClient;
  /** A share link viewer's client: reads only, sendMessages refuses. */
  shared?: SharedClient;
  /** Called with every new position, to keep it (e.g. in localStorage). */
  onPosition?: (p: StreamPosition) => void;
  /** Called with each accepted message's receipt (input id, duplicate). */
  onReceipt?: (r: InputReceipt) => void;
  /** Waits before a send is tried again after a network failure (default: until online, at most 5 s). */
  waitToRetry?: (attempt: number, signal?: AbortSignal) => Promise<void>;
}

/**
 * A ChatTransport for @ai-sdk/react's useChat over the AstraBox Sessions API.
 *
 * - A new user message is POSTed to /inputs with its id as client_message_id (a send
 *   retried after a network failure is the same message: the server answers the first
 *   receipt), then the stream is read from the receipt's output_seq.
 * - A continuation of an assistant message (after addToolApprovalResponse) answers every
 *   approval the user responded to, by its approval id (AstraBox's interaction id), then
 *   reads the stream on from the cursor.
 * - reconnectToStream replays the open response from just before its first `start`
 *   (resumeStreamIsReplay), so a reload or a dropped connection rebuilds the message
 *   whole: nothing doubled, nothing missing. With no response open and nothing new to
 *   read it returns null instead of waiting for the next response.
 * - data-resume-cursor parts are consumed here: they move the position and never reach
 *   the messages.
 */
export class SessionTransport<M extends UIMessage = UIMessage> implements ChatTransport<M> {
  readonly resumeStreamIsReplay = true;
  private position: StreamPosition = { cursor: 0, messageStart: null };
  private readonly answered = new Set<string>();

  constructor(private readonly opts: SessionTransportOptions) {
    if (!opts.client && !opts.shared) throw new Error('SessionTransport needs a client or a shared client');
  }

  get current(): StreamPosition {
    return { ...this.position };
  }

  /** Sets the position from the first page of messages (or a saved one). */
  setPosition(p: StreamPosition) {
    this.position = { ...p };
  }

  /** Sets the position from the first page of GET /messages. */
  seedFromPage(page: Pick<MessagePage, 'output_seq' | 'replay_seq'>) {
    this.setPosition({ cursor: page.output_seq ?? 0, messageStart: page.replay_seq ?? null });
  }

  async sendMessages(options: Parameters<ChatTransport<M>['sendMessages']>[0]): Promise<ReadableStream<UIMessageChunk>> {
    const client = this.opts.client;
    if (!client) throw new Error('a shared conversation is read-only');
    if (options.trigger === 'regenerate-message') {
      throw new Error('AstraBox does not regenerate a response: send a new message');
    }
    const last = options.messages[options.messages.length - 1];
    if (!last) throw new Error('no message to send');
    let from = this.position.cursor;
    if (last.role === 'user') {
      const content = last.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n');
      const receipt = await this.sendOnce(client, { content, client_message_id: last.id }, options.abortSignal);
      this.opts.onReceipt?.(receipt);
      // A response already open is read from its start; otherwise from the receipt.
      from = this.position.messageStart ?? Math.max(receipt.output_seq, this.position.cursor);
    } else {
      for (const part of last.parts) {
        if (!isToolUIPart(part) || part.state !== 'approval-responded') continue;
        const approval = part.approval;
        if (this.answered.has(approval.id)) continue;
        try {
          await client.answer(this.opts.sessionId, approval.id, {
            answer: { decision: approval.approved ? 'approve' : 'deny', ...(approval.reason ? { reason: approval.reason } : {}) },
          });
        } catch (err) {
          // Answered elsewhere (another tab): the stream carries what was decided.
          if (!(err instanceof ApiError && err.code === 'INTERACTION_NOT_OPEN')) throw err;
        }
        this.answered.add(approval.id);
      }
    }
    return this.open(from, options.abortSignal);
  }

  async reconnectToStream(options: Parameters<ChatTransport<M>['reconnectToStream']>[0]): Promise<ReadableStream<UIMessageChunk> | null> {
    const { messageStart, cursor } = this.position;
    if (messageStart === null) {
      // The stream waits for the next response: open it only when one is running or a
      // held message will start one. Output recorded since, with nothing open, is read
      // from the history instead (GET /messages).
      const details = await this.details(options.abortSignal);
      if (details.current_responses.length === 0 && details.held_inputs.length === 0) return null;
    }
    return this.open(messageStart ?? cursor, options.abortSignal);
  }

  /** Reads the stream after `after`, tracking the cursor and dropping cursor parts. */
  private async open(after: number, signal?: AbortSignal): Promise<ReadableStream<UIMessageChunk>> {
    const path = `/stream?after_seq=${after}`;
    const res = this.opts.shared
      ? await this.opts.shared.raw(path, signal)
      : await this.opts.client!.raw('GET', `/sessions/${encodeURIComponent(this.opts.sessionId)}${path}`, {
          signal,
          headers: { Accept: 'text/event-stream' },
        });
    if (!res.ok || !res.body) {
      await readEnvelope(res);
      throw new ApiError(res.status, 'HTTP_' + res.status, 'the stream did not open');
    }
    this.position.cursor = after;
    const chunks = parseJsonEventStream({ stream: res.body, schema: uiMessageChunkSchema });
    return chunks.pipeThrough(
      new TransformStream({
        transform: (result, controller) => {
          if (!result.success) throw result.error;
          const chunk = result.value as UIMessageChunk;
          if (chunk.type === 'data-resume-cursor') {
            const seq = (chunk.data as { seq?: unknown }).seq;
            if (typeof seq === 'number') {
              this.position.cursor = seq;
              this.opts.onPosition?.(this.current);
            }
            return;
          }
          if (chunk.type === 'start' && this.position.messageStart === null) {
            // The cursor before this part: the start part's own cursor comes after it.
            this.position.messageStart = this.position.cursor;
          }
          if (chunk.type === 'finish' && chunk.finishReason !== 'tool-calls') {
            this.position.messageStart = null;
          }
          controller.enqueue(chunk);
        },
      }),
    );
  }

  private async details(signal?: AbortSignal): Promise<SessionDetails> {
    if (this.opts.shared) return (await this.opts.shared.session(signal)).session;
    return this.opts.client!.getSession(this.opts.sessionId, signal);
  }

  private sendOnce(client: SessionsClient, body: { content: string; client_message_id: string }, signal?: AbortSignal) {
    return sendInputOnce(client, this.opts.sessionId, body, { signal, waitToRetry: this.opts.waitToRetry });
  }
}

/**
 * POSTs a message, trying again after network failures and 503s (not after a refusal):
 * the client_message_id makes every try the same message, so it is accepted once.
 */
export async function sendInputOnce(
  client: SessionsClient,
  sessionId: string,
  body: { content: string; client_message_id: string },
  opts: { signal?: AbortSignal; waitToRetry?: (attempt: number, signal?: AbortSignal) => Promise<void> } = {},
) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await client.sendInput(sessionId, body, opts.signal);
    } catch (err) {
      const retryable = err instanceof TypeError || (err instanceof ApiError && err.status === 503);
      if (!retryable || opts.signal?.aborted) throw err;
      await (opts.waitToRetry ?? waitForNetwork)(attempt, opts.signal);
    }
  }
}

/** Waits until the browser says it is online, or a backoff of at most 5 s. */
export function waitForNetwork(attempt: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const delay = Math.min(5000, 250 * 2 ** (attempt - 1));
    const done = () => {
      clearTimeout(timer);
      globalThis.removeEventListener?.('online', done);
      signal?.removeEventListener('abort', aborted);
      resolve();
    };
    const aborted = () => {
      clearTimeout(timer);
      globalThis.removeEventListener?.('online', done);
      reject(signal?.reason ?? new Error('aborted'));
    };
    const timer = setTimeout(done, delay);
    globalThis.addEventListener?.('online', done);
    signal?.addEventListener('abort', aborted);
  });
}
