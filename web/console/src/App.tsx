import { SessionsClient } from '@astrabox/client';
import type { SessionSummary, User } from '@astrabox/client';
import { useCallback, useEffect, useMemo, useState } from 'react';
import { getToken, setToken, signOut } from './auth';
import { Conversation } from './Conversation';
import { Home } from './Home';
import { useRoute } from './router';
import { SharedView } from './SharedView';
import { Sidebar } from './Sidebar';
import { explain } from './errors';

export function App() {
  const route = useRoute();
  const [token, setTok] = useState(getToken);
  if (route.name === 'shared') return <SharedView token={route.token} />;
  if (!token) return <SignIn onSignedIn={() => setTok(getToken())} />;
  return (
    <Console
      onSignOut={() => {
        signOut();
        setTok(null);
      }}
    />
  );
}

function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState('');
  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    const client = new SessionsClient({ getToken: () => value.trim() });
    try {
      await client.me();
      setToken(value);
      onSignedIn();
    } catch (err) {
      setError(explain(err));
    }
  };
  return (
    <main className="signin">
      <form onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">Sign in to AstraBox</h1>
        <label htmlFor="token">API token</label>
        <input id="token" type="password" autoComplete="off" autoFocus value={value} onChange={(e) => setValue(e.target.value)} placeholder="abx_…" />
        <button type="submit" className="primary" disabled={!value.trim()}>
          Sign in
        </button>
        {error && <p role="alert" className="notice error">{error}</p>}
        <p className="hint">`make run` prints a link that signs you in with the development token; `astrabox tokens create` issues one.</p>
      </form>
    </main>
  );
}

function Console({ onSignOut }: { onSignOut: () => void }) {
  const route = useRoute();
  const client = useMemo(() => new SessionsClient({ getToken }), []);
  const [me, setMe] = useState<User | null>(null);
  const [sessions, setSessions] = useState<SessionSummary[]>([]);
  const [archived, setArchived] = useState(false);
  const [listError, setListError] = useState('');

  const refresh = useCallback(async () => {
    try {
      setSessions(await client.listSessions({ archived }));
      setListError('');
    } catch (err) {
      setListError(explain(err));
    }
  }, [client, archived]);

  useEffect(() => {
    client.me().then((r) => setMe(r.user), () => onSignOut());
  }, [client, onSignOut]);
  useEffect(() => {
    void refresh();
    const t = setInterval(refresh, 3000);
    return () => clearInterval(t);
  }, [refresh]);

  return (
    <div className="layout">
      <Sidebar
        client={client}
        sessions={sessions}
        archived={archived}
        setArchived={setArchived}
        refresh={refresh}
        currentId={route.name === 'session' ? route.id : null}
        error={listError}
        me={me}
        onSignOut={onSignOut}
      />
      <main className="main" id="main">
        {route.name === 'session' ? (
          <Conversation key={route.id} client={client} sessionId={route.id} onChanged={refresh} />
        ) : (
          <Home client={client} onStarted={refresh} />
        )}
      </main>
    </div>
  );
}
