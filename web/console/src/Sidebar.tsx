import type { SessionSummary, SessionsClient, User } from '@astrabox/client';
import { useEffect, useRef, useState } from 'react';
import { explain } from './errors';
import { navigate } from './router';

interface Props {
  client: SessionsClient;
  sessions: SessionSummary[];
  archived: boolean;
  setArchived: (v: boolean) => void;
  refresh: () => Promise<void>;
  currentId: string | null;
  error: string;
  me: User | null;
  onSignOut: () => void;
}

export const titleOf = (s: { title: string | null }) => s.title ?? 'New conversation';

// The conversation list: newest output first (the API's order), an unread dot, rename,
// archive and delete, and the bell that turns on browser notifications.
export function Sidebar({ client, sessions, archived, setArchived, refresh, currentId, error, me, onSignOut }: Props) {
  const [notice, setNotice] = useState('');
  useNotifications(sessions, currentId);
  // A refusal is about the moment it happened: it leaves after a while.
  useEffect(() => {
    if (!notice) return;
    const t = setTimeout(() => setNotice(''), 12_000);
    return () => clearTimeout(t);
  }, [notice]);

  const act = async (what: string, f: () => Promise<unknown>) => {
    try {
      await f();
      setNotice('');
      await refresh();
    } catch (e) {
      setNotice(explain(e, what));
    }
  };

  return (
    <nav className="sidebar" aria-label="Conversations">
      <div className="sidebar-head">
        <a href="/" className="brand" onClick={(e) => (e.preventDefault(), navigate('/'))}>
          AstraBox
        </a>
        <Bell />
      </div>
      <button className="primary wide" onClick={() => navigate('/')}>
        Agents · Start conversation
      </button>
      <div className="filter" role="group" aria-label="Which conversations">
        <button aria-pressed={!archived} onClick={() => setArchived(false)}>
          Active
        </button>
        <button aria-pressed={archived} onClick={() => setArchived(true)}>
          Archived
        </button>
      </div>
      {(error || notice) && (
        <p role="alert" className="notice error">
          {notice || error}
        </p>
      )}
      <ul className="sessions">
        {sessions.length === 0 && <li className="muted empty">{archived ? 'No archived conversations.' : 'No conversations yet.'}</li>}
        {sessions.map((s) => (
          <SessionRow
            key={s.session_id}
            s={s}
            current={s.session_id === currentId}
            onRename={(title) => act('renamed', () => client.rename(s.session_id, { title }))}
            onArchive={() => act('archived', () => client.archive(s.session_id))}
            onDelete={() => {
              if (confirm(`Delete “${titleOf(s)}”? It cannot be undone.`)) {
                void act('deleted', async () => {
                  await client.deleteSession(s.session_id);
                  if (s.session_id === currentId) navigate('/');
                });
              }
            }}
          />
        ))}
      </ul>
      <div className="sidebar-foot">
        <span className="muted">{me?.email}</span>
        <button onClick={onSignOut}>Sign out</button>
      </div>
    </nav>
  );
}

function SessionRow(props: { s: SessionSummary; current: boolean; onRename: (t: string) => void; onArchive: () => void; onDelete: () => void }) {
  const { s, current } = props;
  const [editing, setEditing] = useState(false);
  const [menu, setMenu] = useState(false);
  return (
    <li className={`session-row${current ? ' current' : ''}`} data-session-id={s.session_id}>
      {editing ? (
        <RenameForm
          initial={s.title ?? ''}
          onDone={(t) => {
            setEditing(false);
            if (t !== null) props.onRename(t);
          }}
        />
      ) : (
        <a
          href={`/sessions/${s.session_id}`}
          aria-current={current ? 'page' : undefined}
          onClick={(e) => (e.preventDefault(), navigate(`/sessions/${s.session_id}`))}
          onDoubleClick={() => setEditing(true)}
        >
          {s.unread && !current && <span className="dot" role="img" aria-label="unread" />}
          <span className="row-title">{titleOf(s)}</span>
          <span className={`state state-${s.state.toLowerCase()}`}>{stateWord(s.state)}</span>
        </a>
      )}
      <button className="icon" aria-label={`Actions for ${titleOf(s)}`} aria-expanded={menu} onClick={() => setMenu(!menu)}>
        ⋯
      </button>
      {menu && (
        <div className="menu" role="menu" onBlur={(e) => !e.currentTarget.contains(e.relatedTarget) && setMenu(false)}>
          <button role="menuitem" autoFocus onClick={() => (setMenu(false), setEditing(true))}>
            Rename
          </button>
          {!s.archived && (
            <button role="menuitem" onClick={() => (setMenu(false), props.onArchive())}>
              Archive
            </button>
          )}
          <button role="menuitem" className="danger" onClick={() => (setMenu(false), props.onDelete())}>
            Delete
          </button>
        </div>
      )}
    </li>
  );
}

export function RenameForm({ initial, onDone }: { initial: string; onDone: (title: string | null) => void }) {
  const [v, setV] = useState(initial);
  return (
    <form
      className="rename"
      onSubmit={(e) => {
        e.preventDefault();
        onDone(v.trim() ? v : null);
      }}
    >
      <input
        aria-label="Conversation title"
        autoFocus
        value={v}
        maxLength={200}
        onChange={(e) => setV(e.target.value)}
        onKeyDown={(e) => e.key === 'Escape' && onDone(null)}
        onBlur={() => onDone(v.trim() && v !== initial ? v : null)}
      />
    </form>
  );
}

export function stateWord(state: string): string {
  switch (state) {
    case 'PROCESSING':
      return 'working';
    case 'WAITING_INPUT':
      return 'needs you';
    case 'CREATING':
      return 'starting';
    case 'TERMINATED':
      return 'stopped';
    default:
      return '';
  }
}

// The bell asks for the browser's permission (only from a click, as browsers require).
function Bell() {
  const supported = typeof Notification !== 'undefined';
  const [perm, setPerm] = useState(supported ? Notification.permission : 'denied');
  if (!supported) return null;
  return (
    <button
      className="icon bell"
      aria-pressed={perm === 'granted'}
      title={perm === 'granted' ? 'Notifications are on' : perm === 'denied' ? 'Notifications are blocked in this browser' : 'Notify me when an agent answers'}
      aria-label="Browser notifications"
      onClick={async () => setPerm(await Notification.requestPermission())}
    >
      <svg width="18" height="18" viewBox="0 0 24 24" aria-hidden="true" fill="none" stroke="currentColor" strokeWidth="2">
        <path d="M6 8a6 6 0 0 1 12 0c0 7 3 9 3 9H3s3-2 3-9M10.3 21a1.94 1.94 0 0 0 3.4 0" />
        {perm !== 'granted' && <path d="M3 3l18 18" />}
      </svg>
    </button>
  );
}

// A notification when a conversation other than the one in view gets new output.
function useNotifications(sessions: SessionSummary[], currentId: string | null) {
  const seen = useRef(new Map<string, string | null>());
  useEffect(() => {
    const first = seen.current.size === 0;
    for (const s of sessions) {
      const before = seen.current.get(s.session_id);
      seen.current.set(s.session_id, s.last_output_at);
      if (first || before === undefined || before === s.last_output_at || !s.unread) continue;
      if (s.session_id === currentId && document.visibilityState === 'visible') continue;
      if (typeof Notification !== 'undefined' && Notification.permission === 'granted') {
        const n = new Notification(titleOf(s), { body: 'The agent answered.', tag: s.session_id });
        n.onclick = () => (focus(), navigate(`/sessions/${s.session_id}`));
      }
    }
  }, [sessions, currentId]);
}
