import { useChat } from '@ai-sdk/react';
import { SessionTransport, SharedClient } from '@astrabox/client';
import type { MessagePage, SharedSession, SessionUIMessage, WorkspaceListing } from '@astrabox/client';
import { useEffect, useMemo, useState } from 'react';
import { Transcript } from './Conversation';
import { explain } from './errors';
import { inputFailures } from './parts';
import { titleOf } from './Sidebar';

// A share link's read-only view: the conversation, followed live, and the workspace's
// files when the link allows downloads. No account; the token in the path is the credential.
export function SharedView({ token }: { token: string }) {
  const shared = useMemo(() => new SharedClient(token), [token]);
  const [loaded, setLoaded] = useState<{ s: SharedSession; page: MessagePage } | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    Promise.all([shared.session(), shared.messages()]).then(
      ([s, page]) => setLoaded({ s, page }),
      (e) => setError(explain(e).replace('session', 'conversation')),
    );
  }, [shared]);
  if (error) return <p role="alert" className="notice error pad">This link does not open a conversation: it may have expired or been revoked. ({error})</p>;
  if (!loaded) return <p className="pad" aria-busy="true">Loading…</p>;
  return <SharedChat shared={shared} initial={loaded} />;
}

function SharedChat({ shared, initial }: { shared: SharedClient; initial: { s: SharedSession; page: MessagePage } }) {
  const sessionId = initial.s.session.session_id;
  const transport = useMemo(() => {
    const t = new SessionTransport<SessionUIMessage>({ sessionId, shared });
    t.seedFromPage({ output_seq: initial.page.output_seq ?? initial.s.session.output_seq, replay_seq: initial.page.replay_seq });
    return t;
  }, [sessionId, shared, initial]);
  const { messages, status, resumeStream } = useChat<SessionUIMessage>({ id: 'shared:' + sessionId, transport, messages: initial.page.messages, resume: true, throttle: 50 });
  // Follow new responses while the page is open.
  useEffect(() => {
    if (status !== 'ready') return;
    const t = setInterval(() => void resumeStream(), 4000);
    return () => clearInterval(t);
  }, [status, resumeStream]);
  return (
    <div className="shared">
      <header className="conv-head">
        <h1>{titleOf(initial.s.session)}</h1>
        <span className="badge">Read-only · shared until {new Date(initial.s.share.expires_at).toLocaleString()}</span>
      </header>
      <Transcript messages={messages} actions={{}} failures={inputFailures(messages)} model={initial.s.session.model_name} />
      {initial.s.share.allow_download && <SharedFiles shared={shared} />}
    </div>
  );
}

function SharedFiles({ shared }: { shared: SharedClient }) {
  const [path, setPath] = useState('');
  const [listing, setListing] = useState<WorkspaceListing | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    shared.listWorkspace(path).then(setListing, (e) => setError(explain(e)));
  }, [shared, path]);
  return (
    <section className="shared-files" aria-labelledby="shared-files-title">
      <h2 id="shared-files-title">Files</h2>
      {error && <p className="notice">{error}</p>}
      {path && <button onClick={() => setPath(path.split('/').slice(0, -1).join('/'))}>Up</button>}
      <ul className="files">
        {listing?.entries.map((en) => (
          <li key={en.path}>
            {en.kind === 'directory' ? (
              <button className="link" onClick={() => setPath(en.path)}>
                {en.name}/
              </button>
            ) : (
              <a href={shared.downloadUrl(en.path)} download>
                {en.name}
              </a>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
