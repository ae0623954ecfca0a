import type { ChildRun, SessionsClient } from '@astrabox/client';
import { useCallback, useEffect, useState } from 'react';
import { explain } from '../errors';

// The Agents tab: the child runs (sub-agents) of this conversation, and their stop.
export function ChildRunsPanel({ client, sessionId }: { client: SessionsClient; sessionId: string }) {
  const [runs, setRuns] = useState<ChildRun[] | null>(null);
  const [error, setError] = useState('');
  const load = useCallback(async () => {
    try {
      setRuns(await client.childRuns(sessionId));
    } catch (e) {
      setError(explain(e));
    }
  }, [client, sessionId]);
  useEffect(() => {
    void load();
    const t = setInterval(load, 3000);
    return () => clearInterval(t);
  }, [load]);
  return (
    <section aria-labelledby="runs-title">
      <h2 id="runs-title">Child runs</h2>
      {error && <p role="alert" className="notice error">{error}</p>}
      {runs?.length === 0 && <p className="muted">The agent has started no child runs here.</p>}
      <ul className="runs">
        {runs?.map((r) => (
          <li key={r.child_run_id} className="card">
            <strong>{r.name || r.child_run_id}</strong> <span className="badge">{r.status}</span>
            {r.stoppable && (
              <button
                className="danger"
                onClick={() =>
                  client.stopChildRun(sessionId, r.child_run_id).then(load, (e) => setError(explain(e)))
                }
              >
                Stop
              </button>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
