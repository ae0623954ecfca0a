import { summarizeUsage } from '@astrabox/client';
import type { SessionDataParts, SessionUIMessage, Usage } from '@astrabox/client';
import { isToolUIPart } from 'ai';
import { useEffect, useRef, useState } from 'react';

type Part = SessionUIMessage['parts'][number];

export interface PartActions {
  /** Answers a tool approval; absent in a read-only view. */
  approve?: (approvalId: string, approved: boolean) => void;
  /** Answers a question (decision or form); absent in a read-only view. */
  answer?: (interactionId: string, answer: { decision?: string; values?: unknown }) => void;
  /** Which interaction is open now (the Session's pending_interaction). */
  openInteraction?: string | null;
  /** Loads the parts folded under a history block. */
  unfold?: (block: SessionDataParts['process-block']) => Promise<Part[]>;
  /** Opens a side panel (diff, child runs). */
  openPanel?: (panel: 'diff' | 'agents') => void;
}

export function MessageView({ m, actions, model, usage }: { m: SessionUIMessage; actions: PartActions; model?: string | null; usage?: Usage }) {
  const meta = m.metadata ?? {};
  const visible = m.parts.filter((p) => p.type !== 'step-start' && p.type !== 'data-input-failed');
  if (m.role === 'user') {
    const text = m.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
    return (
      <article className="msg user" aria-label="Your message" data-message-id={m.id}>
        <div className="bubble">{text}</div>
        {meta.failure && (
          <p className="notice error" role="status">
            Not delivered ({meta.failure.code}): {meta.failure.message}
          </p>
        )}
      </article>
    );
  }
  if (visible.length === 0 && !meta.outcome) return null;
  return (
    <article className="msg assistant" aria-label="Agent response" data-message-id={m.id}>
      <Parts parts={visible} actions={actions} />
      <Outcome meta={meta} />
      <UsageLine meta={meta} model={model} usage={meta.usage ?? usage} />
    </article>
  );
}

export function Parts({ parts, actions }: { parts: Part[]; actions: PartActions }) {
  return (
    <>
      {parts.map((p, i) => (
        <PartView key={partKey(p, i)} p={p} actions={actions} />
      ))}
    </>
  );
}

function partKey(p: Part, i: number): string {
  if (isToolUIPart(p)) return 'tool:' + p.toolCallId;
  if ('id' in p && typeof p.id === 'string') return p.type + ':' + p.id;
  return p.type + ':' + i;
}

function PartView({ p, actions }: { p: Part; actions: PartActions }) {
  if (p.type === 'text') return <div className="text">{p.text}</div>;
  if (p.type === 'reasoning') return <Reasoning text={p.text} streaming={p.state === 'streaming'} />;
  if (isToolUIPart(p)) return <ToolCard p={p} actions={actions} />;
  switch (p.type) {
    case 'data-interaction':
      return <Question data={p.data as SessionDataParts['interaction']} actions={actions} />;
    case 'data-file-changes': {
      const d = p.data as SessionDataParts['file-changes'];
      return (
        <button className="chip" onClick={() => actions.openPanel?.('diff')}>
          Changed {d.changes.map((c) => c.path).join(', ')} · view diff
        </button>
      );
    }
    case 'data-subagent': {
      const d = p.data as SessionDataParts['subagent'];
      return (
        <button className="chip" onClick={() => actions.openPanel?.('agents')}>
          Child run {d.name ?? d.child_run_id}: {d.status ?? 'running'}
        </button>
      );
    }
    case 'data-process-block':
      return <Folded block={p.data as SessionDataParts['process-block']} actions={actions} />;
    case 'file':
      return (
        <a className="chip" href={p.url} download={p.filename}>
          {p.filename ?? p.mediaType}
        </a>
      );
    case 'source-url':
      return (
        <a className="chip" href={p.url} rel="noreferrer" target="_blank">
          {p.title ?? p.url}
        </a>
      );
  }
  return null;
}

// Reasoning is open while it streams and folds once done.
function Reasoning({ text, streaming }: { text: string; streaming: boolean }) {
  const [open, setOpen] = useState(streaming);
  const was = useRef(streaming);
  useEffect(() => {
    if (was.current && !streaming) setOpen(false);
    was.current = streaming;
  }, [streaming]);
  return (
    <details className="reasoning" open={open} onToggle={(e) => setOpen(e.currentTarget.open)}>
      <summary>{streaming ? 'Thinking…' : 'Thought'}</summary>
      <div className="text muted">{text}</div>
    </details>
  );
}

const toolStates: Record<string, string> = {
  'input-streaming': 'Pending',
  'input-available': 'Running',
  'approval-requested': 'Awaiting approval',
  'approval-responded': 'Responded',
  'output-available': 'Completed',
  'output-error': 'Error',
  'output-denied': 'Denied',
};

/** The most telling input of a tool call, for its one-line subtitle. */
function subtitle(input: unknown): string {
  if (typeof input !== 'object' || input === null) return '';
  const o = input as Record<string, unknown>;
  for (const k of ['command', 'file_path', 'path', 'pattern', 'url', 'description', 'prompt', 'query']) {
    if (typeof o[k] === 'string') return o[k] as string;
  }
  return '';
}

function ToolCard({ p, actions }: { p: Extract<Part, { toolCallId: string }>; actions: PartActions }) {
  const name = p.type === 'dynamic-tool' ? p.toolName : p.type.slice('tool-'.length);
  const waiting = p.state === 'approval-requested';
  const [open, setOpen] = useState(false);
  const [sent, setSent] = useState<boolean | null>(null);
  const approval = 'approval' in p ? p.approval : undefined;
  const output = p.state === 'output-available' ? p.output : undefined;
  const error = p.state === 'output-error' ? p.errorText : undefined;
  return (
    <div className={`tool card state-${p.state}`} data-tool-name={name}>
      <button className="tool-head" aria-expanded={open || waiting} onClick={() => setOpen(!open)}>
        <span className="tool-name">{name}</span>
        <span className="tool-sub">{subtitle(p.input)}</span>
        <span className={`badge badge-${p.state}`}>{toolStates[p.state] ?? p.state}</span>
      </button>
      {(open || waiting) && (
        <div className="tool-body">
          <h4>Input</h4>
          <pre>{JSON.stringify(p.input, null, 2)}</pre>
          {output !== undefined && (
            <>
              <h4>Result</h4>
              <pre>{typeof output === 'string' ? output : JSON.stringify(output, null, 2)}</pre>
            </>
          )}
          {error && (
            <>
              <h4>Error</h4>
              <pre className="error">{error}</pre>
            </>
          )}
        </div>
      )}
      {waiting && approval && actions.approve && (
        <div className="approval" role="group" aria-label={`Approve ${name}?`}>
          <span>
            Allow <strong>{name}</strong> to run?
          </span>
          <button
            className="primary"
            autoFocus
            disabled={sent !== null}
            onClick={() => {
              setSent(true);
              actions.approve!(approval.id, true);
            }}
          >
            Approve
          </button>
          <button
            className="danger"
            disabled={sent !== null}
            onClick={() => {
              setSent(false);
              actions.approve!(approval.id, false);
            }}
          >
            Deny
          </button>
        </div>
      )}
      {approval && !waiting && 'approved' in approval && approval.approved !== undefined && (
        <p className="muted small">{approval.approved ? 'Approved' : 'Denied'}</p>
      )}
    </div>
  );
}

// A question the program asked (a decision among options, or a form); tool approvals
// are answered on their tool card instead.
function Question({ data, actions }: { data: SessionDataParts['interaction']; actions: PartActions }) {
  const [values, setValues] = useState('{}');
  const c = data.contract;
  if (c.presentation === 'tool_approval') return null;
  const open = actions.answer && actions.openInteraction === data.interaction_id;
  return (
    <div className="question card" role="group" aria-label="The agent asks">
      <p>{c.prompt ?? c.title ?? 'The agent asks:'}</p>
      {open && c.presentation === 'decision' && (
        <div className="options">
          {c.options?.map((o, i) => (
            <button key={o.id} autoFocus={i === 0} onClick={() => actions.answer!(data.interaction_id, { decision: o.id })}>
              {o.label ?? o.id}
            </button>
          ))}
        </div>
      )}
      {open && c.presentation === 'form' && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            try {
              actions.answer!(data.interaction_id, { values: JSON.parse(values) });
            } catch {
              alert('The answer must be a JSON object.');
            }
          }}
        >
          <label>
            Answer (JSON)
            <textarea value={values} onChange={(e) => setValues(e.target.value)} />
          </label>
          <button className="primary">Answer</button>
        </form>
      )}
      {!open && <p className="muted small">Answered or closed.</p>}
    </div>
  );
}

// Work folded in history: one line that opens into its parts on demand.
function Folded({ block, actions }: { block: SessionDataParts['process-block']; actions: PartActions }) {
  const [parts, setParts] = useState<Part[] | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <div className="folded">
      {parts === null ? (
        <button
          className="chip"
          disabled={busy || !actions.unfold}
          onClick={async () => {
            setBusy(true);
            try {
              setParts(await actions.unfold!(block));
            } finally {
              setBusy(false);
            }
          }}
        >
          {block.kind === 'response' ? 'Show the work' : `${block.part_count} ${block.part_count === 1 ? 'step' : 'steps'}`}
          {block.outcome && block.outcome !== 'completed' ? ` (${block.outcome})` : ''}
        </button>
      ) : (
        <div className="unfolded">
          <Parts parts={parts} actions={actions} />
        </div>
      )}
    </div>
  );
}

function Outcome({ meta }: { meta: NonNullable<SessionUIMessage['metadata']> }) {
  if (meta.outcome === 'failed')
    return (
      <p className="notice error" role="status">
        The response failed{meta.native_reason ? ` (${meta.native_reason})` : ''}
        {meta.error_text ? `: ${meta.error_text}` : '.'}
      </p>
    );
  if (meta.outcome === 'cancelled')
    return (
      <p className="notice" role="status">
        Interrupted{meta.native_reason && meta.native_reason !== 'cancelled' ? ` (${meta.native_reason})` : ''}.
      </p>
    );
  return null;
}

function UsageLine({ meta, model, usage }: { meta: NonNullable<SessionUIMessage['metadata']>; model?: string | null; usage?: unknown }) {
  const u = summarizeUsage(usage);
  if (!u && !meta.outcome) return null;
  const models = u?.models.length ? u.models.join(', ') : (meta.model_name ?? model);
  const bits = [
    models,
    u?.inputTokens !== undefined ? `${u.inputTokens.toLocaleString()} in` : null,
    u?.outputTokens !== undefined ? `${u.outputTokens.toLocaleString()} out` : null,
    u?.costUSD !== undefined ? `$${u.costUSD.toFixed(4)}${u.costIsTotal ? ' total so far' : ''}` : null,
  ].filter(Boolean);
  if (bits.length === 0) return null;
  return <p className="usage muted small">{bits.join(' · ')}</p>;
}

/** Every data-input-failed part, by the input it refused. */
export function inputFailures(messages: SessionUIMessage[]): Map<string, SessionDataParts['input-failed']> {
  const out = new Map<string, SessionDataParts['input-failed']>();
  for (const m of messages)
    for (const p of m.parts)
      if (p.type === 'data-input-failed') {
        const d = p.data as SessionDataParts['input-failed'];
        out.set(d.input_id, d);
      }
  return out;
}
