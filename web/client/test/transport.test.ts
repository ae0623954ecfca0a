import { Chat } from '@ai-sdk/react';
import { lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import type { UIMessage } from 'ai';
import { describe, expect, it } from 'vitest';
import { ApiError, SessionsClient, SessionTransport, summarizeUsage } from '../src';
import { FakeApi, textResponse } from './fakeapi';

function setup(api: FakeApi, onReceipt?: (r: unknown) => void) {
  const client = new SessionsClient({ baseUrl: 'http://api.test', getToken: () => 'abx_test', fetch: api.fetch });
  const transport = new SessionTransport<UIMessage>({ sessionId: 's-1', client, onReceipt, waitToRetry: async () => {} });
  return { client, transport };
}

function waitReady(chat: Chat<UIMessage>) {
  return new Promise<void>((resolve, reject) => {
    const check = () => {
      if (chat.status === 'ready') return resolve();
      if (chat.status === 'error') return reject(chat.error);
      setTimeout(check, 1);
    };
    check();
  });
}

const textOf = (m: UIMessage | undefined) => m?.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('') ?? '';

describe('SessionTransport', () => {
  it('sends only the new message with its id as client_message_id, then reads its response', async () => {
    const api = new FakeApi();
    api.append(...textResponse('r-0', ['earlier']));
    api.onInput = (b) => {
      const receipt = { input_id: 'in-2', client_message_id: b.client_message_id, output_seq: api.log.length, duplicate: false };
      api.append(...textResponse('r-1', ['Hello', ', ', 'world']));
      return receipt;
    };
    const receipts: unknown[] = [];
    const { transport } = setup(api, (r) => receipts.push(r));
    transport.setPosition({ cursor: 5, messageStart: null });
    const chat = new Chat<UIMessage>({ id: 's-1', transport, messages: [{ id: 'u-0', role: 'user', parts: [{ type: 'text', text: 'hi' }] }] });
    await chat.sendMessage({ text: 'Say hello', messageId: undefined });
    await waitReady(chat);

    const post = api.calls.find((c) => c.method === 'POST')!;
    expect(post.path).toBe('/api/v1/sessions/s-1/inputs');
    expect(post.headers.Authorization).toBe('Bearer abx_test');
    const sent = chat.messages[1]!;
    expect(post.body).toEqual({ content: 'Say hello', client_message_id: sent.id });
    expect(api.calls.find((c) => c.path.includes('/stream'))!.path).toContain('after_seq=5');
    expect(chat.messages).toHaveLength(3);
    expect(chat.messages[2]!.id).toBe('r-1');
    expect(textOf(chat.messages[2])).toBe('Hello, world');
    expect(chat.messages[2]!.parts.some((p) => p.type === 'data-resume-cursor')).toBe(false);
    expect(transport.current).toEqual({ cursor: 12, messageStart: null });
    expect(receipts).toHaveLength(1);
  });

  it('sends a message again after a network failure, as the same message', async () => {
    const api = new FakeApi();
    let tries = 0;
    api.onInput = (b) => {
      tries++;
      if (tries === 1) throw new TypeError('Failed to fetch');
      const r = { input_id: 'in-1', client_message_id: b.client_message_id, output_seq: 0, duplicate: false };
      api.append(...textResponse('r-1', ['ok']));
      return r;
    };
    const { transport } = setup(api);
    const chat = new Chat<UIMessage>({ id: 's-1', transport });
    await chat.sendMessage({ text: 'once' });
    await waitReady(chat);
    const posts = api.calls.filter((c) => c.method === 'POST');
    expect(posts).toHaveLength(2);
    expect(posts[0]!.body).toEqual(posts[1]!.body);
    expect(textOf(chat.messages[1])).toBe('ok');
  });

  it('answers an approval by its interaction id and continues the same message', async () => {
    const api = new FakeApi();
    const approvalParts = [
      { type: 'start', messageId: 'r-1' },
      { type: 'tool-input-start', toolCallId: 'call-1', toolName: 'Bash', dynamic: true },
      { type: 'tool-input-available', toolCallId: 'call-1', toolName: 'Bash', dynamic: true, input: { command: 'touch a' } },
      { type: 'tool-approval-request', approvalId: 'int-1', toolCallId: 'call-1' },
      { type: 'data-interaction', data: { interaction_id: 'int-1', approval_id: 'int-1', contract: { presentation: 'tool_approval' } } },
      { type: 'finish', finishReason: 'tool-calls' },
    ];
    api.onInput = () => {
      api.append(...approvalParts);
      return { input_id: 'in-1', output_seq: 0 };
    };
    const answers: unknown[] = [];
    api.onAnswer = (id, body) => {
      answers.push([id, body]);
      api.append(
        { type: 'start', messageId: 'r-1' },
        { type: 'tool-approval-response', approvalId: 'int-1', approved: true },
        { type: 'tool-output-available', toolCallId: 'call-1', output: 'done' },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'Created.' },
        { type: 'text-end', id: 't' },
        { type: 'finish', finishReason: 'stop' },
      );
    };
    const { transport } = setup(api);
    const finishes: string[] = [];
    const chat = new Chat<UIMessage>({
      id: 's-1',
      transport,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      onFinish: ({ finishReason }) => finishes.push(String(finishReason)),
    });
    // The fake stream ends at the end of its log, as a dropped live stream would.
    await chat.sendMessage({ text: 'make a file' });
    await waitReady(chat);
    const tool = chat.messages[1]!.parts.find((p) => p.type === 'dynamic-tool') as { state: string; toolName: string };
    expect(tool.state).toBe('approval-requested');
    expect(tool.toolName).toBe('Bash');

    await chat.addToolApprovalResponse({ id: 'int-1', approved: true });
    await waitReady(chat);
    await new Promise((r) => setTimeout(r, 10));
    await waitReady(chat);
    expect(answers).toEqual([['int-1', { answer: { decision: 'approve' } }]]);
    expect(chat.messages).toHaveLength(2);
    const after = chat.messages[1]!.parts.find((p) => p.type === 'dynamic-tool') as { state: string };
    expect(after.state).toBe('output-available');
    expect(textOf(chat.messages[1])).toBe('Created.');
    expect(finishes).toEqual(['tool-calls', 'stop']);
  });

  it('rebuilds an open response whole after a reload, then finds nothing more to read', async () => {
    const api = new FakeApi();
    api.append({ type: 'start', messageId: 'u' }, { type: 'finish', finishReason: 'stop' }); // an earlier response
    const words = ['one ', 'two ', 'three ', 'four'];
    const response = textResponse('r-1', words);
    api.append(...response);
    api.openResponses = 1;
    const { transport } = setup(api);
    // The recorded copy (GET /messages) holds the first words; the page says where the response began.
    transport.seedFromPage({ output_seq: 5, replay_seq: 2 });
    const recorded: UIMessage[] = [
      { id: 'u-1', role: 'user', parts: [{ type: 'text', text: 'count' }] },
      { id: 'r-1', role: 'assistant', parts: [{ type: 'text', text: 'one two ', state: 'streaming' }] },
    ];
    const chat = new Chat<UIMessage>({ id: 's-1', transport, messages: recorded });
    await chat.resumeStream();
    await waitReady(chat);
    expect(api.calls.at(-1)!.path).toContain('after_seq=2');
    expect(chat.messages.map((m) => m.id)).toEqual(['u-1', 'r-1']);
    expect(textOf(chat.messages[1])).toBe('one two three four');
    expect(transport.current).toEqual({ cursor: api.log.length, messageStart: null });

    api.openResponses = 0;
    const before = api.calls.length;
    await chat.resumeStream();
    await waitReady(chat);
    expect(api.calls.slice(before).map((c) => c.path)).toEqual(['/api/v1/sessions/s-1']);
  });

  it('follows the next response when a held message waits', async () => {
    const api = new FakeApi();
    api.append(...textResponse('r-1', ['first']));
    const { transport } = setup(api);
    transport.setPosition({ cursor: api.log.length, messageStart: null });
    api.held = 1;
    api.append(...textResponse('r-2', ['second']));
    const chat = new Chat<UIMessage>({ id: 's-1', transport });
    await chat.resumeStream();
    await waitReady(chat);
    expect(chat.messages.map((m) => m.id)).toEqual(['r-2']);
    expect(textOf(chat.messages[0])).toBe('second');
  });

  it('reads refusals as ApiError with the code and data', async () => {
    const api = new FakeApi();
    const { client } = setup(api);
    const err = await client.interrupt('s-1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 409, code: 'PENDING_INPUTS_NOT_CANCELLED', data: { input_ids: ['in-1'] } });
  });

  it('refuses to regenerate', async () => {
    const { transport } = setup(new FakeApi());
    await expect(
      transport.sendMessages({ trigger: 'regenerate-message', chatId: 's-1', messageId: undefined, messages: [], abortSignal: undefined }),
    ).rejects.toThrow(/regenerate/);
  });
});

describe('summarizeUsage', () => {
  it('reads Claude Code and Codex usage records', () => {
    expect(
      summarizeUsage({ total_cost_usd: 0.05, usage: { input_tokens: 10, output_tokens: 5 }, modelUsage: { 'claude-opus': {} } }),
    ).toEqual({ inputTokens: 10, outputTokens: 5, costUSD: 0.05, costIsTotal: true, models: ['claude-opus'] });
    expect(summarizeUsage({ total: { inputTokens: 9, outputTokens: 2 } })).toEqual({ inputTokens: 9, outputTokens: 2, costUSD: undefined, models: [] });
    expect(summarizeUsage(null)).toBeNull();
    expect(summarizeUsage({})).toBeNull();
  });
});
