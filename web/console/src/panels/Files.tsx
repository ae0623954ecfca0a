import type { SessionsClient, WorkspaceListing } from '@astrabox/client';
import { useCallback, useEffect, useState } from 'react';
import { explain } from '../errors';

// The Files panel: browse the workspace, download a file or a folder (zip), upload.
export function FilesPanel({ client, sessionId }: { client: SessionsClient; sessionId: string }) {
  const [path, setPath] = useState('');
  const [listing, setListing] = useState<WorkspaceListing | null>(null);
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const load = useCallback(async () => {
    try {
      setListing(await client.listWorkspace(sessionId, path));
      setError('');
    } catch (e) {
      setListing(null);
      setError(explain(e));
    }
  }, [client, sessionId, path]);
  useEffect(() => void load(), [load]);

  const download = async (p: string, folder: boolean) => {
    try {
      const blob = await client.download(sessionId, p, folder);
      const url = URL.createObjectURL(blob);
      const a = document.createElement('a');
      a.href = url;
      a.download = (p.split('/').pop() || 'workspace') + (folder ? '.zip' : '');
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      setError(explain(e));
    }
  };

  const up = path.split('/').slice(0, -1).join('/');
  return (
    <section aria-labelledby="files-title">
      <h2 id="files-title">Files</h2>
      <p className="crumbs">
        <code>/{path}</code> {path && <button onClick={() => setPath(up)}>Up</button>} <button onClick={() => void load()}>Refresh</button>{' '}
        <button onClick={() => void download(path, true)}>Download folder</button>
      </p>
      <label className="upload">
        Upload into this folder
        <input
          type="file"
          multiple
          disabled={busy}
          onChange={async (e) => {
            const files = e.currentTarget.files;
            if (!files?.length) return;
            setBusy(true);
            try {
              await client.upload(sessionId, path, Array.from(files));
              await load();
            } catch (err) {
              setError(explain(err));
            } finally {
              setBusy(false);
              e.target.value = '';
            }
          }}
        />
      </label>
      {error && <p role="alert" className="notice error">{error}</p>}
      <ul className="files">
        {listing?.entries.map((en) => (
          <li key={en.path}>
            {en.kind === 'directory' ? (
              <button className="link" onClick={() => setPath(en.path)}>
                {en.name}/
              </button>
            ) : (
              <button className="link" onClick={() => void download(en.path, false)} title="Download">
                {en.name} <span className="muted small">{en.size.toLocaleString()} B</span>
              </button>
            )}
          </li>
        ))}
        {listing?.entries.length === 0 && <li className="muted">Empty folder.</li>}
      </ul>
    </section>
  );
}
