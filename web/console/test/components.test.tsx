// @vitest-environment jsdom
import { ApiError } from '@astrabox/client';
import type { SessionUIMessage } from '@astrabox/client';
import { cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { explain } from '../src/errors';
import { DiffPanel, lineDiff } from '../src/panels/Diff';
import { MessageView } from '../src/parts';

afterEach(cleanup);

const approvalMessage: SessionUIMessage = {
  id: 'resp-1',
  role: 'assistant',
  parts: [
    {
      type: 'dynamic-tool',
      toolName: 'Bash',
      toolCallId: 'call-1',
      state: 'approval-requested',
      input: { command: 'touch approved.txt' },
      approval: { id: 'int-1' },
    },
  ],
};

describe('MessageView', () => {
  it('shows a tool card under the program’s own tool name and answers its approval by id', () => {
    const approve = vi.fn();
    render(<MessageView m={approvalMessage} actions={{ approve }} />);
    expect(document.querySelector('.tool-name')?.textContent).toBe('Bash');
    expect(screen.getByText('Awaiting approval')).toBeTruthy();
    expect(screen.getAllByText(/touch approved.txt/).length).toBeGreaterThan(0);
    const button = screen.getByRole('button', { name: 'Approve' });
    expect(document.activeElement).toBe(button);
    fireEvent.click(button);
    expect(approve).toHaveBeenCalledWith('int-1', true);
    expect((screen.getByRole('button', { name: 'Deny' }) as HTMLButtonElement).disabled).toBe(true);
  });

  it('offers no approval in a read-only view', () => {
    render(<MessageView m={approvalMessage} actions={{}} />);
    expect(screen.queryByRole('button', { name: 'Approve' })).toBeNull();
  });

  it('says a response failed or was interrupted, and shows its usage, cost and model', () => {
    const failed: SessionUIMessage = { id: 'r', role: 'assistant', parts: [{ type: 'text', text: 'half' }], metadata: { outcome: 'failed', error_text: 'overloaded now' } };
    const { unmount } = render(<MessageView m={failed} actions={{}} />);
    expect(screen.getByRole('status').textContent).toContain('overloaded now');
    unmount();
    const cancelled: SessionUIMessage = { id: 'r', role: 'assistant', parts: [{ type: 'text', text: 'so' }], metadata: { outcome: 'cancelled' } };
    render(
      <MessageView
        m={cancelled}
        actions={{}}
        usage={{ total_cost_usd: 0.0123, usage: { input_tokens: 1200, output_tokens: 34 }, modelUsage: { 'claude-opus-5-5': {} } }}
      />,
    );
    expect(screen.getByRole('status').textContent).toContain('Interrupted');
    expect(document.querySelector('.usage')?.textContent).toMatch(/claude-opus-5-5 · 1,200 in · 34 out · \$0\.0123 total so far/);
  });
});

describe('DiffPanel', () => {
  it('lists each changed file with its status letter and diff', () => {
    const m: SessionUIMessage = {
      id: 'r',
      role: 'assistant',
      parts: [
        { type: 'data-file-changes', id: 'c1', data: { tool_call_id: 'c1', changes: [{ path: 'hello.py', diff: { format: 'content_pair', after: 'print(1)' } }] } },
        { type: 'data-file-changes', id: 'c2', data: { tool_call_id: 'c2', changes: [{ path: 'a.txt', kind: 'update', diff: { format: 'unified_patch', patch: '--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new' } }] } },
      ],
    };
    render(<DiffPanel messages={[m]} />);
    expect(screen.getByLabelText('added').textContent).toBe('A');
    expect(screen.getByLabelText('modified').textContent).toBe('M');
    expect([...document.querySelectorAll('.dl-add')].map((e) => e.textContent)).toEqual(['+print(1)', '+new']);
    expect([...document.querySelectorAll('.dl-del')].map((e) => e.textContent)).toEqual(['-old']);
  });

  it('diffs content pairs by line', () => {
    expect(lineDiff(['a', 'b', 'c'], ['a', 'c', 'd'])).toEqual([
      { kind: ' ', text: 'a' },
      { kind: '-', text: 'b' },
      { kind: ' ', text: 'c' },
      { kind: '+', text: 'd' },
    ]);
  });
});

describe('explain', () => {
  it('says why an interrupt found nothing to stop and a delete was refused', () => {
    const pending = new ApiError(409, 'PENDING_INPUTS_NOT_CANCELLED', 'no open response', { input_ids: ['a', 'b'] });
    expect(explain(pending)).toMatch(/2 messages are queued .* never withdraws queued messages/);
    expect(explain(new ApiError(409, 'SESSION_BUSY', 'busy'), 'deleted')).toMatch(/cannot be deleted now. Interrupt/);
  });
});
