import type { ShareView, SessionsClient } from '@astrabox/client';
import { useCallback, useEffect, useRef, useState } from 'react';
import { explain } from '../errors';

const expiries = [
  { label: '1 hour', ms: 3600_000 },
  { label: '1 day', ms: 86_400_000 },
  { label: '7 days', ms: 7 * 86_400_000 },
  { label: '30 days', ms: 30 * 86_400_000 },
];

// The Share dialog: a read-only link with an expiry, optionally allowing downloads; the
// link is shown once (AstraBox keeps only its hash), and any link can be revoked.
export function ShareDialog({ client, sessionId, onClose }: { client: SessionsClient; sessionId: string; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [expiry, setExpiry] = useState(1);
  const [downloads, setDownloads] = useState(false);
  const [link, setLink] = useState('');
  const [shares, setShares] = useState<ShareView[]>([]);
  const [error, setError] = useState('');
  const load = useCallback(() => client.listShares(sessionId).then(setShares, (e) => setError(explain(e))), [client, sessionId]);
  useEffect(() => {
    dialog.current?.showModal();
    void load();
  }, [load]);
  const create = async () => {
    try {
      const s = await client.createShare(sessionId, { expires_at: new Date(Date.now() + expiries[expiry]!.ms).toISOString(), allow_download: downloads });
      setLink(`${location.origin}/s/${s.token}`);
      void load();
    } catch (e) {
      setError(explain(e));
    }
  };
  return (
    <dialog ref={dialog} className="dialog" onClose={onClose} aria-labelledby="share-title">
      <h2 id="share-title">Share this conversation</h2>
      <p className="muted small">Anyone with the link can read the conversation (and follow it live) until it expires or you revoke it. They cannot write.</p>
      <label>
        Expires in{' '}
        <select value={expiry} onChange={(e) => setExpiry(Number(e.target.value))}>
          {expiries.map((x, i) => (
            <option key={x.label} value={i}>
              {x.label}
            </option>
          ))}
        </select>
      </label>
      <label className="check">
        <input type="checkbox" checked={downloads} onChange={(e) => setDownloads(e.target.checked)} /> Allow downloading workspace files
      </label>
      <button className="primary" onClick={create}>
        Create link
      </button>
      {link && (
        <div className="share-link">
          <input aria-label="Share link" readOnly value={link} onFocus={(e) => e.currentTarget.select()} />
          <button onClick={() => void navigator.clipboard?.writeText(link)}>Copy</button>
          <p className="muted small">Copy it now: it is shown only once.</p>
        </div>
      )}
      {error && <p role="alert" className="notice error">{error}</p>}
      <h3>Links</h3>
      <ul className="shares">
        {shares.length === 0 && <li className="muted">None yet.</li>}
        {shares.map((s) => (
          <li key={s.share_id}>
            <span className={`badge state-${s.state}`}>{s.state}</span> until {new Date(s.expires_at).toLocaleString()}
            {s.allow_download ? ' · downloads' : ''}
            {s.state === 'active' && (
              <button className="danger" onClick={() => client.revokeShare(sessionId, s.share_id).then(load, (e) => setError(explain(e)))}>
                Revoke
              </button>
            )}
          </li>
        ))}
      </ul>
      <form method="dialog">
        <button>Close</button>
      </form>
    </dialog>
  );
}
