import type { Agent, SessionsClient } from '@astrabox/client';
import { useEffect, useState } from 'react';
import { explain } from './errors';
import { navigate } from './router';

// The Agents tab: every Agent the user may start a conversation with.
export function Home({ client, onStarted }: { client: SessionsClient; onStarted: () => void }) {
  const [agents, setAgents] = useState<Agent[] | null>(null);
  const [error, setError] = useState('');
  const [starting, setStarting] = useState<string | null>(null);
  useEffect(() => {
    client.listAgents().then(setAgents, (e) => setError(explain(e)));
  }, [client]);

  const start = async (agent: Agent) => {
    setStarting(agent.agent_id);
    try {
      const created = await client.startConversation(agent.agent_id, crypto.randomUUID());
      onStarted();
      navigate(`/sessions/${created.session_id}`);
    } catch (e) {
      setError(explain(e));
    } finally {
      setStarting(null);
    }
  };

  return (
    <section className="home" aria-labelledby="agents-title">
      <h1 id="agents-title">Agents</h1>
      {error && <p role="alert" className="notice error">{error}</p>}
      {agents === null && !error && <p aria-busy="true">Loading…</p>}
      {agents?.length === 0 && <p>No Agents yet. An administrator creates them with the API (POST /api/v1/agents).</p>}
      <ul className="agents">
        {agents?.map((a) => (
          <li key={a.agent_id} className="agent card">
            <div>
              <h2>{a.name}</h2>
              <p className="muted">
                {a.engine_kind}
                {a.permission_mode ? ` · ${a.permission_mode}` : ''}
              </p>
              {a.description && <p>{a.description}</p>}
            </div>
            <button className="primary" onClick={() => start(a)} disabled={starting !== null} aria-label={`Start conversation with ${a.name}`}>
              {starting === a.agent_id ? 'Starting…' : 'Start conversation'}
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
