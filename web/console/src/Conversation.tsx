import { useChat } from '@ai-sdk/react';
import { ApiError, SessionTransport, sendInputOnce } from '@astrabox/client';
import type { AnswerBody, Usage } from '@astrabox/client';
import type { MessagePage, SessionDetails, SessionsClient, SessionUIMessage } from '@astrabox/client';
import { lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { explain } from './errors';
import { ChildRunsPanel } from './panels/ChildRuns';
import { DiffPanel } from './panels/Diff';
import { FilesPanel } from './panels/Files';
import { ShareDialog } from './panels/Share';
import { TerminalPanel } from './panels/Terminal';
import { MessageView, inputFailures } from './parts';
import type { PartActions } from './parts';
import { RenameForm, stateWord, titleOf } from './Sidebar';

interface Loaded {
  details: SessionDetails;
  page: MessagePage;
}

export function Conversation({ client, sessionId, onChanged }: { client: SessionsClient; sessionId: string; onChanged: () => void }) {
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    let live = true;
    Promise.all([client.getSession(sessionId), client.historyBlocks(sessionId)]).then(
      ([details, page]) => live && setLoaded({ details, page }),
      (e) => live && setError(e instanceof ApiError && e.code === 'NOT_FOUND' ? 'This conversation does not exist, or was deleted.' : explain(e)),
    );
    return () => {
      live = false;
    };
  }, [client, sessionId]);
  if (error) return <p role="alert" className="notice error pad">{error}</p>;
  if (!loaded) return <p className="pad" aria-busy="true">Loading…</p>;
  return <ConversationChat client={client} sessionId={sessionId} initial={loaded} onChanged={onChanged} />;
}

/** A message sent while the agent was busy: held by AstraBox until a response takes it. */
interface Held {
  clientMessageId: string;
  inputId: string | null;
  text: string;
}

type Panel = 'diff' | 'files' | 'terminal' | 'agents' | null;

function ConversationChat({ client, sessionId, initial, onChanged }: { client: SessionsClient; sessionId: string; initial: Loaded; onChanged: () => void }) {
  const [details, setDetails] = useState(initial.details);
  // Usage arrives with a response's end in the Session's details (the stream's finish
  // carries the outcome only): keep it by response id, which is the message id.
  const [usages, setUsages] = useState<Record<string, Usage>>({});
  useEffect(() => {
    const ended = [details.last_response, ...details.current_responses].filter((r) => r?.usage);
    if (ended.length === 0) return;
    setUsages((u) => {
      const next = { ...u };
      for (const r of ended) next[r!.response_id] = r!.usage!;
      return next;
    });
  }, [details]);
  const [held, setHeld] = useState<Held[]>([]);
  const [notice, setNotice] = useState('');
  const [panel, setPanel] = useState<Panel>(null);
  const [sharing, setSharing] = useState(false);
  const [renaming, setRenaming] = useState(false);
  const inputIds = useRef(new Map<string, string>());

  const transport = useMemo(() => {
    const t = new SessionTransport<SessionUIMessage>({
      sessionId,
      client,
      onReceipt: (r) => r.client_message_id && inputIds.current.set(r.client_message_id, r.input_id),
    });
    t.seedFromPage({ output_seq: initial.page.output_seq ?? initial.details.output_seq, replay_seq: initial.page.replay_seq });
    return t;
  }, [client, sessionId, initial]);

  const refreshDetails = useCallback(async () => {
    try {
      setDetails(await client.getSession(sessionId));
    } catch {
      /* the next poll tries again */
    }
  }, [client, sessionId]);

  const chat = useChat<SessionUIMessage>({
    id: sessionId,
    transport,
    messages: initial.page.messages,
    resume: true,
    throttle: 50,
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    onFinish: () => {
      void client.markRead(sessionId).then(onChanged, () => {});
      void refreshDetails();
    },
  });
  const { status, messages, setMessages } = chat;
  const busy = status === 'streaming' || status === 'submitted';

  // Keep the details fresh; follow responses this tab did not start (another tab, a held
  // message, the program on its own) once nothing is being read.
  const following = useRef(false);
  useEffect(() => {
    const t = setInterval(refreshDetails, busy ? 1500 : 2500);
    return () => clearInterval(t);
  }, [refreshDetails, busy]);
  useEffect(() => {
    if (status !== 'ready' || following.current) return;
    const running = details.current_responses.length > 0 || details.held_inputs.length > 0;
    if (running) {
      following.current = true;
      void chat.resumeStream().finally(() => {
        following.current = false;
      });
    } else if (details.output_seq > transport.current.cursor) {
      // Output recorded while this tab read nothing (another tab's response, a part
      // after the last finish): take the history as recorded.
      following.current = true;
      void client
        .historyBlocks(sessionId)
        .then((page) => {
          transport.seedFromPage({ output_seq: page.output_seq ?? details.output_seq, replay_seq: page.replay_seq });
          setMessages(page.messages);
        }, () => {})
        .finally(() => {
          following.current = false;
        });
    }
  }, [status, details, transport, chat, client, sessionId, setMessages]);
  // Back online after a dropped stream: read on from where it stopped.
  useEffect(() => {
    const on = () => status === 'error' && void chat.resumeStream();
    addEventListener('online', on);
    return () => removeEventListener('online', on);
  }, [status, chat]);
  useEffect(() => {
    void client.markRead(sessionId).then(onChanged, () => {});
  }, [client, sessionId, onChanged]);

  // A response to a message this tab never saw (sent from another tab) is followed live;
  // once it ends, the history brings the message itself.
  useEffect(() => {
    if (status !== 'ready') return;
    const last = messages.at(-1);
    if (last?.role !== 'assistant') return;
    const known = new Set(messages.flatMap((m) => (m.role === 'user' ? [m.metadata?.input_id ?? inputIds.current.get(m.id)] : [])));
    for (const h of held) if (h.inputId) known.add(h.inputId);
    if ((last.metadata?.input_ids ?? []).every((id) => known.has(id))) return;
    void client.historyBlocks(sessionId).then((page) => {
      transport.seedFromPage({ output_seq: page.output_seq, replay_seq: page.replay_seq });
      setMessages(page.messages);
    }, () => {});
  }, [status, messages, held, client, sessionId, transport, setMessages]);

  // A held message joins the conversation when a response lists it.
  useEffect(() => {
    if (held.length === 0) return;
    const taken = new Set(messages.flatMap((m) => (m.role === 'assistant' ? (m.metadata?.input_ids ?? []) : [])));
    const now = held.filter((h) => h.inputId && taken.has(h.inputId));
    if (now.length === 0) return;
    setHeld((hs) => hs.filter((h) => !now.includes(h)));
    setMessages((ms) => {
      const out = [...ms];
      for (const h of now) {
        const at = out.findIndex((m) => m.role === 'assistant' && m.metadata?.input_ids?.includes(h.inputId!));
        if (out.some((m) => m.id === h.clientMessageId)) continue;
        out.splice(at < 0 ? out.length : at, 0, {
          id: h.clientMessageId,
          role: 'user',
          parts: [{ type: 'text', text: h.text }],
          metadata: { input_id: h.inputId! },
        });
      }
      return out;
    });
  }, [messages, held, setMessages]);

  const send = async (text: string) => {
    setNotice('');
    const direct = status === 'ready' && details.current_responses.length === 0 && transport.current.messageStart === null;
    if (direct) {
      await chat.sendMessage({ text });
      return;
    }
    const h: Held = { clientMessageId: crypto.randomUUID(), inputId: null, text };
    setHeld((hs) => [...hs, h]);
    try {
      const r = await sendInputOnce(client, sessionId, { content: text, client_message_id: h.clientMessageId });
      setHeld((hs) => hs.map((x) => (x === h ? { ...x, inputId: r.input_id } : x)));
      void refreshDetails();
    } catch (e) {
      setHeld((hs) => hs.filter((x) => x !== h));
      setNotice(explain(e));
    }
  };

  const interrupt = async () => {
    try {
      const r = await client.interrupt(sessionId);
      setNotice(r.status === 'idle' ? 'Nothing is running to interrupt.' : '');
    } catch (e) {
      setNotice(explain(e));
    }
  };

  const actions: PartActions = {
    approve: (approvalId, approved) => {
      if (status === 'ready') {
        // The transport answers it and reads the continuation.
        void chat.addToolApprovalResponse({ id: approvalId, approved });
        return;
      }
      // The stream is still open: answer directly, the stream carries the decision.
      client.answer(sessionId, approvalId, { answer: { decision: approved ? 'approve' : 'deny' } }).catch((e) => setNotice(explain(e)));
    },
    answer: (interactionId, answer) => {
      client.answer(sessionId, interactionId, { answer: answer as AnswerBody['answer'] }).then(refreshDetails, (e) => setNotice(explain(e)));
    },
    openInteraction: details.pending_interaction?.interaction_id ?? null,
    unfold: async (block) => (await client.historyBlock(sessionId, block.block_id, block.cursor)).parts,
    openPanel: (p) => setPanel(p),
  };

  const recordedMessages = useCallback(async () => {
    const all: SessionUIMessage[] = [];
    let before: string | undefined;
    for (let i = 0; i < 20; i++) {
      const page = await client.messages(sessionId, before);
      all.unshift(...page.messages);
      if (!page.has_more || !page.before) break;
      before = page.before;
    }
    return all;
  }, [client, sessionId]);
  const failures = inputFailures(messages);
  const working = busy || details.state === 'PROCESSING' || details.state === 'WAITING_INPUT';
  const queuedElsewhere = details.held_inputs.filter((i) => !held.some((h) => h.inputId === i.input_id));

  return (
    <div className={`conversation${panel ? ' with-panel' : ''}`}>
      <header className="conv-head">
        {renaming ? (
          <RenameForm
            initial={details.title ?? ''}
            onDone={async (t) => {
              setRenaming(false);
              if (t === null) return;
              try {
                setDetails(await client.rename(sessionId, { title: t }));
                onChanged();
              } catch (e) {
                setNotice(explain(e));
              }
            }}
          />
        ) : (
          <h1>
            <button className="title-button" title="Rename" onClick={() => setRenaming(true)}>
              {titleOf(details)}
            </button>
          </h1>
        )}
        <span className={`state state-${details.state.toLowerCase()}`} aria-live="polite">
          {stateWord(details.state)}
        </span>
        {details.model_name && <span className="muted small">{details.model_name}</span>}
        <div className="tabs" role="tablist" aria-label="Panels">
          {(['diff', 'files', 'terminal', 'agents'] as const).map((p) => (
            <button key={p} role="tab" aria-selected={panel === p} onClick={() => setPanel(panel === p ? null : p)}>
              {p === 'diff' ? 'Diff' : p === 'files' ? 'Files' : p === 'terminal' ? 'Terminal' : 'Agents'}
            </button>
          ))}
          <button onClick={() => setSharing(true)}>Share</button>
        </div>
      </header>
      {details.runtime_error && <p className="notice error">The agent could not start: {details.runtime_error}</p>}
      <Transcript messages={messages} actions={actions} failures={failures} inputIds={inputIds.current} model={details.model_name} usages={usages} />
      <div className="composer-area">
        {held.map((h) => (
          <div key={h.clientMessageId} className="msg user pending" aria-label="Queued message">
            <div className="bubble">{h.text}</div>
            <p className="muted small">Queued: the agent takes it after the current response.</p>
          </div>
        ))}
        {queuedElsewhere.length > 0 && <p className="muted small">{queuedElsewhere.length} queued message(s) wait for the agent.</p>}
        {status === 'error' && (
          <p role="alert" className="notice error">
            The stream was interrupted: {chat.error?.message}.{' '}
            <button onClick={() => void chat.resumeStream()}>Reconnect</button>
          </p>
        )}
        {notice && (
          <p role="alert" className="notice">
            {notice}
          </p>
        )}
        <Composer onSend={send} onInterrupt={interrupt} working={working} disabled={details.state === 'DELETED'} />
      </div>
      {panel && (
        <aside className="panel" aria-label={`${panel} panel`}>
          <button className="icon close" aria-label="Close panel" onClick={() => setPanel(null)}>
            ✕
          </button>
          {panel === 'diff' && <DiffPanel messages={messages} recorded={recordedMessages} />}
          {panel === 'files' && <FilesPanel client={client} sessionId={sessionId} />}
          {panel === 'terminal' && <TerminalPanel client={client} sessionId={sessionId} />}
          {panel === 'agents' && <ChildRunsPanel client={client} sessionId={sessionId} />}
        </aside>
      )}
      {sharing && <ShareDialog client={client} sessionId={sessionId} onClose={() => setSharing(false)} />}
    </div>
  );
}

export function Transcript({
  messages,
  actions,
  failures,
  inputIds,
  model,
  usages,
}: {
  messages: SessionUIMessage[];
  actions: PartActions;
  failures: ReturnType<typeof inputFailures>;
  inputIds?: Map<string, string>;
  model?: string | null;
  usages?: Record<string, Usage>;
}) {
  const end = useRef<HTMLDivElement>(null);
  const box = useRef<HTMLDivElement>(null);
  // Open at the latest message, then stay at the bottom while it grows, unless the
  // reader scrolled up.
  const opened = useRef(false);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    if (!opened.current || el.scrollHeight - el.scrollTop - el.clientHeight < 160) end.current?.scrollIntoView({ block: 'end' });
    opened.current = true;
  }, [messages]);
  return (
    <div className="transcript" ref={box} aria-live="polite" aria-busy={false}>
      {messages.length === 0 && <p className="muted pad">Say what you want done.</p>}
      {messages.map((m) => {
        const inputId = m.metadata?.input_id ?? inputIds?.get(m.id);
        const failure = m.role === 'user' && inputId ? failures.get(inputId) : undefined;
        return (
          <div key={m.id}>
            <MessageView m={m} actions={actions} model={model} usage={usages?.[m.id]} />
            {failure && (
              <p className="notice error msg-failure" role="status">
                This message was refused ({failure.code}): {failure.message}
              </p>
            )}
          </div>
        );
      })}
      <div ref={end} />
    </div>
  );
}

function Composer({ onSend, onInterrupt, working, disabled }: { onSend: (t: string) => Promise<void>; onInterrupt: () => void; working: boolean; disabled: boolean }) {
  const [text, setText] = useState('');
  const submit = () => {
    const t = text.trim();
    if (!t) return;
    setText('');
    void onSend(t);
  };
  return (
    <form
      className="composer"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <textarea
        aria-label="Message"
        placeholder={working ? 'The agent is working; a message now is queued…' : 'Message the agent (Enter sends, Shift+Enter for a new line, Esc interrupts)'}
        value={text}
        disabled={disabled}
        rows={3}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
            e.preventDefault();
            submit();
          } else if (e.key === 'Escape' && working) {
            e.preventDefault();
            onInterrupt();
          }
        }}
      />
      <div className="composer-buttons">
        {working && (
          <button type="button" className="danger" onClick={onInterrupt}>
            Interrupt
          </button>
        )}
        <button type="submit" className="primary" disabled={!text.trim() || disabled}>
          Send
        </button>
      </div>
    </form>
  );
}
