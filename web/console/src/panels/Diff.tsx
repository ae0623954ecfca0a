import type { FileChange, FileDiff, SessionDataParts, SessionUIMessage } from '@astrabox/client';
import { useEffect, useState } from 'react';

// The Diff panel: every file change the agent reported (data-file-changes), newest
// report per tool call, one collapsible row per file with its diff rendered on demand.
export function DiffPanel({ messages, recorded }: { messages: SessionUIMessage[]; recorded?: () => Promise<SessionUIMessage[]> }) {
  // The conversation in view folds finished work (history-blocks), file changes included:
  // the panel also reads the recorded messages whole, once opened.
  const [history, setHistory] = useState<SessionUIMessage[]>([]);
  useEffect(() => {
    recorded?.().then(setHistory, () => {});
  }, [recorded]);
  const byCall = new Map<string, FileChange[]>();
  for (const m of [...history, ...messages])
    for (const p of m.parts)
      if (p.type === 'data-file-changes') {
        const d = p.data as SessionDataParts['file-changes'];
        byCall.set(d.tool_call_id, d.changes);
      }
  const changes = [...byCall.values()].flat();
  return (
    <section aria-labelledby="diff-title">
      <h2 id="diff-title">Changes</h2>
      {changes.length === 0 && <p className="muted">No file changes reported in this conversation yet.</p>}
      <ul className="changes">
        {changes.map((c, i) => (
          <Change key={i} c={c} />
        ))}
      </ul>
    </section>
  );
}

function letter(c: FileChange): string {
  const k = (c.kind ?? '').toLowerCase();
  if (k.startsWith('add') || k === 'create' || (c.diff?.format === 'content_pair' && c.diff.before === undefined)) return 'A';
  if (k.startsWith('del') || (c.diff?.format === 'content_pair' && c.diff.after === undefined)) return 'D';
  if (c.move_path) return 'R';
  return 'M';
}

function Change({ c }: { c: FileChange }) {
  const [open, setOpen] = useState(true);
  const l = letter(c);
  return (
    <li className="change">
      <button className="change-head" aria-expanded={open} onClick={() => setOpen(!open)}>
        <span className={`letter letter-${l}`} aria-label={{ A: 'added', D: 'deleted', R: 'moved', M: 'modified' }[l]}>
          {l}
        </span>
        <code>{c.path}</code>
        {c.move_path && <span className="muted"> → {c.move_path}</span>}
      </button>
      {open && (c.diff ? <DiffBody d={c.diff} /> : <p className="muted small">The program confirmed the write without a comparison.</p>)}
    </li>
  );
}

type Line = { kind: ' ' | '+' | '-' | '@'; text: string };

export function diffLines(d: FileDiff): Line[] {
  switch (d.format) {
    case 'unified_patch':
      return (d.patch ?? '')
        .split('\n')
        .filter((l) => !l.startsWith('--- ') && !l.startsWith('+++ ') && l !== '')
        .map((l) => ({ kind: (l.startsWith('@@') ? '@' : l[0] === '+' || l[0] === '-' ? l[0] : ' ') as Line['kind'], text: l.startsWith('@@') ? l : l.slice(1) }));
    case 'hunks':
      return (d.hunks ?? []).flatMap((h) => [
        { kind: '@' as const, text: `@@ -${h.old_start},${h.old_lines} +${h.new_start},${h.new_lines} @@` },
        ...h.lines.map((l) => ({ kind: (l[0] === '+' || l[0] === '-' ? l[0] : ' ') as Line['kind'], text: l.slice(1) })),
      ]);
    case 'content_pair':
      return lineDiff(d.before === undefined ? [] : d.before.split('\n'), d.after === undefined ? [] : d.after.split('\n'));
    case 'excerpt':
      return (d.excerpt ?? '').split('\n').map((text) => ({ kind: ' ' as const, text }));
  }
}

/** A line diff by longest common subsequence (files the console shows are small). */
export function lineDiff(a: string[], b: string[]): Line[] {
  if (a.length * b.length > 4_000_000) return [...a.map((text) => ({ kind: '-' as const, text })), ...b.map((text) => ({ kind: '+' as const, text }))];
  const n = a.length;
  const m = b.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  const out: Line[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) (out.push({ kind: ' ', text: a[i]! }), i++, j++);
    else if (lcs[i + 1]![j]! >= lcs[i]![j + 1]!) out.push({ kind: '-', text: a[i++]! });
    else out.push({ kind: '+', text: b[j++]! });
  }
  while (i < n) out.push({ kind: '-', text: a[i++]! });
  while (j < m) out.push({ kind: '+', text: b[j++]! });
  return out;
}

function DiffBody({ d }: { d: FileDiff }) {
  return (
    <pre className="diff" aria-label="Diff">
      {diffLines(d).map((l, i) => (
        <div key={i} className={`dl dl-${l.kind === '+' ? 'add' : l.kind === '-' ? 'del' : l.kind === '@' ? 'hunk' : 'ctx'}`}>
          <span aria-hidden="true">{l.kind === '@' ? '' : l.kind}</span>
          {l.text}
        </div>
      ))}
    </pre>
  );
}
