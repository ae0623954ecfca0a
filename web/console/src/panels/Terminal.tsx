import type { SessionsClient } from '@astrabox/client';
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import '@xterm/xterm/css/xterm.css';
import { useEffect, useRef, useState } from 'react';

interface TerminalMessage {
  type: 'ready' | 'output' | 'exit' | 'error';
  data?: string;
  offset?: number;
  code?: number;
  message?: string;
}

// The web terminal: xterm.js over the Session's terminal WebSocket, shared with every
// other viewer; a reconnect asks only for what it missed (after=<last offset>).
export function TerminalPanel({ client, sessionId }: { client: SessionsClient; sessionId: string }) {
  const host = useRef<HTMLDivElement>(null);
  const [status, setStatus] = useState('connecting…');
  useEffect(() => {
    const term = new Terminal({ convertEol: false, fontSize: 13, cursorBlink: true });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(host.current!);
    fit.fit();
    let offset = 0;
    let ws: WebSocket | null = null;
    let closed = false;
    let retry: ReturnType<typeof setTimeout> | undefined;
    const connect = () => {
      ws = client.openTerminal(sessionId, { after: offset, cols: term.cols, rows: term.rows });
      ws.onmessage = (ev) => {
        const msg = JSON.parse(String(ev.data)) as TerminalMessage;
        if (msg.type === 'ready') setStatus('connected');
        if (msg.type === 'output' && msg.data) {
          term.write(Uint8Array.from(atob(msg.data), (c) => c.charCodeAt(0)));
          offset = msg.offset ?? offset;
        }
        if (msg.type === 'exit') setStatus(`the shell exited (${msg.code ?? '?'}); reopen the panel for a new one`);
        if (msg.type === 'error') setStatus(msg.message ?? 'error');
      };
      ws.onclose = (ev) => {
        if (closed) return;
        setStatus(ev.code === 1006 ? 'unavailable (the workspace may not be running); retrying…' : 'disconnected; retrying…');
        retry = setTimeout(connect, 3000);
      };
    };
    connect();
    const input = term.onData((text) => ws?.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: 'input', text })));
    const resize = term.onResize(({ cols, rows }) => ws?.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: 'resize', cols, rows })));
    const onWindow = () => fit.fit();
    addEventListener('resize', onWindow);
    return () => {
      closed = true;
      clearTimeout(retry);
      removeEventListener('resize', onWindow);
      input.dispose();
      resize.dispose();
      ws?.close();
      term.dispose();
    };
  }, [client, sessionId]);
  return (
    <section aria-labelledby="term-title" className="terminal-panel">
      <h2 id="term-title">Terminal</h2>
      <p className="muted small" aria-live="polite">
        {status}{' '}
        <button onClick={() => void client.interruptTerminal(sessionId)}>Ctrl-C</button>
      </p>
      <div className="xterm-host" ref={host} />
    </section>
  );
}
