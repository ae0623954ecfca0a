import type { paths } from './openapi';
import type {
  Agent,
  ChildRun,
  CreatedSession,
  CreatedShare,
  HistoryBlock,
  InputReceipt,
  InterruptResult,
  MessagePage,
  SessionDetails,
  SessionSummary,
  SessionUIMessage,
  ShareView,
  SharedSession,
  User,
  WorkspaceListing,
} from './types';

/** An error envelope from the API ({code, message, data}), or a transport failure. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly data: unknown = null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The request bodies /openapi.json declares, by route. */
type Body<P extends keyof paths, M extends 'post' | 'patch'> = paths[P][M] extends {
  requestBody?: { content: { 'application/json': infer B } };
}
  ? B
  : never;

export type SendInputBody = Body<'/api/v1/sessions/{session_id}/inputs', 'post'>;
export type AnswerBody = Body<'/api/v1/sessions/{session_id}/interactions/{interaction_id}/answer', 'post'>;
export type CreateShareBody = Body<'/api/v1/sessions/{session_id}/shares', 'post'>;
export type RenameBody = Body<'/api/v1/sessions/{session_id}', 'patch'>;
export type PermissionModeBody = Body<'/api/v1/sessions/{session_id}/permission-mode', 'post'>;

export interface ClientOptions {
  /** Where the API is; '' for the page's own origin. */
  baseUrl?: string;
  /** The bearer token, read on every request (so signing out takes effect at once). */
  getToken: () => string | null;
  fetch?: typeof fetch;
}

const enc = encodeURIComponent;

/** The Sessions API for a signed-in user. Every method resolves to the envelope's data. */
export class SessionsClient {
  readonly baseUrl: string;
  private readonly getToken: () => string | null;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: ClientOptions) {
    this.baseUrl = (opts.baseUrl ?? '').replace(/\/$/, '');
    this.getToken = opts.getToken;
    this.fetchImpl = opts.fetch ?? ((...args) => globalThis.fetch(...args));
  }

  /** A raw request to the API (path under /api/v1), with the bearer token. */
  async raw(method: string, path: string, init: { body?: BodyInit; headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<Response> {
    const headers: Record<string, string> = { ...init.headers };
    const token = this.getToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    return this.fetchImpl(`${this.baseUrl}/api/v1${path}`, { method, headers, body: init.body, signal: init.signal });
  }

  async call<T>(method: string, path: string, body?: unknown, opts: { headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<T> {
    const headers: Record<string, string> = { ...opts.headers };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await this.raw(method, path, {
      body: body === undefined ? undefined : JSON.stringify(body),
      headers,
      signal: opts.signal,
    });
    return readEnvelope<T>(res);
  }

  me = () => this.call<{ user: User }>('GET', '/me');
  listAgents = () => this.call<Agent[]>('GET', '/agents');
  startConversation = (agentId: string, idempotencyKey: string) =>
    this.call<CreatedSession>('POST', `/agents/${enc(agentId)}/conversations`, {}, { headers: { 'Idempotency-Key': idempotencyKey } });

  listSessions = (opts: { archived?: boolean } = {}) =>
    this.call<SessionSummary[]>('GET', `/sessions${opts.archived ? '?archived=true' : ''}`);
  getSession = (id: string, signal?: AbortSignal) => this.call<SessionDetails>('GET', `/sessions/${enc(id)}`, undefined, { signal });
  rename = (id: string, body: RenameBody) => this.call<SessionDetails>('PATCH', `/sessions/${enc(id)}`, body);
  archive = (id: string) => this.call<unknown>('POST', `/sessions/${enc(id)}/archive`);
  deleteSession = (id: string) => this.call<unknown>('DELETE', `/sessions/${enc(id)}`);
  markRead = (id: string) => this.call<unknown>('POST', `/sessions/${enc(id)}/read`);
  setPermissionMode = (id: string, body: PermissionModeBody) =>
    this.call<SessionDetails>('POST', `/sessions/${enc(id)}/permission-mode`, body);

  sendInput = (id: string, body: SendInputBody, signal?: AbortSignal) =>
    this.call<InputReceipt>('POST', `/sessions/${enc(id)}/inputs`, body, { signal });
  interrupt = (id: string) => this.call<InterruptResult>('POST', `/sessions/${enc(id)}/interrupt`);
  answer = (id: string, interactionId: string, body: AnswerBody) =>
    this.call<unknown>('POST', `/sessions/${enc(id)}/interactions/${enc(interactionId)}/answer`, body);

  messages = (id: string, before?: string) =>
    this.call<MessagePage>('GET', `/sessions/${enc(id)}/messages${before ? `?before=${enc(before)}` : ''}`);
  historyBlocks = (id: string, before?: string) =>
    this.call<MessagePage>('GET', `/sessions/${enc(id)}/history-blocks${before ? `?before=${enc(before)}` : ''}`);
  historyBlock = (id: string, blockId: string, cursor: string) =>
    this.call<HistoryBlock>('GET', `/sessions/${enc(id)}/history-blocks/${enc(blockId)}?cursor=${enc(cursor)}`);

  createShare = (id: string, body: CreateShareBody) => this.call<CreatedShare>('POST', `/sessions/${enc(id)}/shares`, body);
  listShares = (id: string) => this.call<ShareView[]>('GET', `/sessions/${enc(id)}/shares`);
  revokeShare = (id: string, shareId: string) => this.call<ShareView>('POST', `/sessions/${enc(id)}/shares/${enc(shareId)}/revoke`);

  childRuns = (id: string) => this.call<ChildRun[]>('GET', `/sessions/${enc(id)}/child-runs`);
  childRunMessages = (id: string, childRunId: string) =>
    this.call<SessionUIMessage[]>('GET', `/sessions/${enc(id)}/child-runs/${enc(childRunId)}/messages`);
  stopChildRun = (id: string, childRunId: string) =>
    this.call<unknown>('POST', `/sessions/${enc(id)}/child-runs/${enc(childRunId)}/stop`);

  listWorkspace = (id: string, path = '') =>
    this.call<WorkspaceListing>('GET', `/sessions/${enc(id)}/workspace/files?path=${enc(path)}`);
  /** Uploads files into the workspace folder `folder`. */
  upload = async (id: string, folder: string, files: Iterable<File>) => {
    const form = new FormData();
    for (const f of files) form.append('file', f, f.name);
    return readEnvelope<unknown>(await this.raw('POST', `/sessions/${enc(id)}/workspace/files?path=${enc(folder)}`, { body: form }));
  };
  /** Downloads a workspace file (or a folder as a zip) as a Blob. */
  download = async (id: string, path: string, folder = false) => {
    const res = await this.raw('GET', `/sessions/${enc(id)}/workspace/download?path=${enc(path)}${folder ? '&format=zip' : ''}`);
    if (!res.ok) await readEnvelope(res);
    return res.blob();
  };

  /**
   * Opens the Session's web terminal. Browsers cannot set headers on a WebSocket, so
   * the token travels as the astrabox.bearer.<token> subprotocol beside astrabox.terminal,
   * which the server answers with (it never echoes the token).
   */
  openTerminal = (id: string, opts: { after?: number; cols?: number; rows?: number } = {}) => {
    const base = this.baseUrl || globalThis.location.origin;
    const url = new URL(`${base}/api/v1/sessions/${enc(id)}/terminal`);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    if (opts.after) url.searchParams.set('after', String(opts.after));
    if (opts.cols) url.searchParams.set('cols', String(opts.cols));
    if (opts.rows) url.searchParams.set('rows', String(opts.rows));
    return new WebSocket(url, ['astrabox.terminal', `astrabox.bearer.${this.getToken() ?? ''}`]);
  };
  interruptTerminal = (id: string) => this.call<{ interrupted: boolean }>('POST', `/sessions/${enc(id)}/terminal/interrupt`);
}

/** A share link viewer's read-only routes: the token in the path is the credential. */
export class SharedClient {
  private readonly base: string;
  private readonly fetchImpl: typeof fetch;

  constructor(readonly shareToken: string, opts: { baseUrl?: string; fetch?: typeof fetch } = {}) {
    this.base = `${(opts.baseUrl ?? '').replace(/\/$/, '')}/api/v1/shared/${enc(shareToken)}`;
    this.fetchImpl = opts.fetch ?? ((...args) => globalThis.fetch(...args));
  }

  raw = (path: string, signal?: AbortSignal) => this.fetchImpl(`${this.base}${path}`, { signal });
  private get = async <T>(path: string, signal?: AbortSignal) => readEnvelope<T>(await this.raw(path, signal));

  session = (signal?: AbortSignal) => this.get<SharedSession>('', signal);
  messages = (before?: string) => this.get<MessagePage>(`/messages${before ? `?before=${enc(before)}` : ''}`);
  listWorkspace = (path = '') => this.get<WorkspaceListing>(`/workspace/files?path=${enc(path)}`);
  downloadUrl = (path: string) => `${this.base}/workspace/download?path=${enc(path)}`;
}

/** Reads an API answer: the envelope's data, or an ApiError with its code. */
export async function readEnvelope<T>(res: Response): Promise<T> {
  const text = await res.text();
  let env: { code?: string; message?: string; data?: unknown } | null = null;
  try {
    env = text ? JSON.parse(text) : null;
  } catch {
    env = null;
  }
  if (!res.ok || env === null || (env.code !== undefined && env.code !== 'OK')) {
    throw new ApiError(
      res.status,
      env?.code ?? 'HTTP_' + res.status,
      env?.message ?? (text.slice(0, 200) || res.statusText || 'request failed'),
      env?.data ?? null,
    );
  }
  return env.data as T;
}
