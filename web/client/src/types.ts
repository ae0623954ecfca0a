// Answers of the Sessions API (the `data` of its envelope). /openapi.json types the
// routes, their parameters and bodies (openapi.d.ts); it describes every answer as the
// envelope only, so the shapes of `data` are written here from docs/api.md.
import type { UIMessage } from 'ai';

export interface User {
  user_id: string;
  email: string;
  display_name: string | null;
  role: 'admin' | 'member';
}

export interface Agent {
  agent_id: string;
  name: string;
  description: string;
  engine_kind: string;
  runtime_profile_id: string;
  permission_mode: string | null;
  version: number;
}

export interface CreatedSession {
  session_id: string;
  agent_id: string;
  deployment_name: string;
}

export type SessionState = 'CREATING' | 'READY' | 'PROCESSING' | 'WAITING_INPUT' | 'TERMINATED' | 'DELETED';

export interface SessionSummary {
  session_id: string;
  agent_id: string;
  state: SessionState;
  runtime_status: string | null;
  title: string | null;
  permission_mode: string | null;
  runtime_unavailable: boolean;
  archived: boolean;
  output_seq: number;
  last_output_at: string | null;
  read_at: string | null;
  unread: boolean;
  created_at: string | null;
  updated_at: string | null;
}

export interface ResponseView {
  response_id: string;
  origin: string;
  input_ids: string[];
  outcome: string | null;
  native_reason: string | null;
  usage: Usage | null;
  error: unknown;
  started_seq: number;
  ended_seq: number | null;
}

export interface InteractionView {
  interaction_id: string;
  response_id: string | null;
  state: string;
  contract: InteractionContract;
  answer_saved: boolean;
}

export interface HeldInput {
  input_id: string;
  client_message_id: string | null;
  state: string;
  accepted_at: string;
}

export interface SessionDetails extends SessionSummary {
  model_name: string | null;
  runtime_error: string | null;
  current_responses: ResponseView[];
  last_response: ResponseView | null;
  pending_interaction: InteractionView | null;
  held_inputs: HeldInput[];
}

export interface InputReceipt {
  session_id: string;
  input_id: string;
  client_message_id: string | null;
  accepted_at: string;
  state: string;
  duplicate: boolean;
  failure: { code: string; message: string } | null;
  output_seq: number;
}

export interface InterruptResult {
  status: 'accepted' | 'idle';
}

/** Token usage and cost as the program reported them; every field is optional. */
export interface Usage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
  total_cost_usd?: number;
  cost_usd?: number;
  model?: string;
  [key: string]: unknown;
}

export interface InteractionOption {
  id: string;
  label?: string;
  description?: string;
}

export interface InteractionContract {
  presentation: 'tool_approval' | 'decision' | 'form';
  title?: string;
  prompt?: string;
  options?: InteractionOption[];
  schema?: unknown;
  [key: string]: unknown;
}

/** The metadata AstraBox puts on UI messages. */
export interface SessionMessageMetadata {
  // A user message.
  input_id?: string;
  state?: string;
  failure?: { code: string; message: string } | null;
  // A response.
  response_id?: string;
  origin?: string;
  input_ids?: string[];
  outcome?: 'completed' | 'failed' | 'cancelled' | string;
  native_reason?: string;
  open?: boolean;
  usage?: Usage | null;
  error_text?: string;
  model?: string;
  model_name?: string;
}

export interface FileDiff {
  format: 'content_pair' | 'unified_patch' | 'hunks' | 'excerpt';
  before?: string;
  after?: string;
  patch?: string;
  hunks?: { old_start: number; old_lines: number; new_start: number; new_lines: number; lines: string[] }[];
  excerpt?: string;
}

export interface FileChange {
  path: string;
  kind?: string;
  move_path?: string;
  diff: FileDiff | null;
}

export interface SessionDataParts {
  interaction: { interaction_id: string; response_id: string; approval_id?: string; contract: InteractionContract };
  'file-changes': { tool_call_id: string; changes: FileChange[] };
  'input-failed': { input_id: string; code: string; message: string };
  'process-block': {
    block_id: string;
    cursor: string;
    kind: 'response' | 'group';
    response_id: string;
    part_count: number;
    outcome: string | null;
    response_completed: boolean;
  };
  subagent: { child_run_id: string; name?: string; status?: string; [key: string]: unknown };
  'resume-cursor': { seq: number };
  [name: string]: unknown;
}

/** A conversation message as the API and the stream build it. */
export type SessionUIMessage = UIMessage<SessionMessageMetadata, SessionDataParts>;

export interface MessagePage {
  messages: SessionUIMessage[];
  has_more: boolean;
  before: string | null;
  /** First page only: follow the stream from here. */
  output_seq?: number;
  /** First page only, while a response is open: rebuild it by reading from here. */
  replay_seq?: number;
}

export interface HistoryBlock {
  parts: SessionUIMessage['parts'];
  [key: string]: unknown;
}

export interface ShareView {
  share_id: string;
  session_id: string;
  allow_download: boolean;
  state: 'active' | 'expired' | 'revoked';
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
}

export interface CreatedShare extends ShareView {
  token: string;
  path: string;
}

export interface SharedSession {
  session: SessionDetails;
  share: { allow_download: boolean; expires_at: string };
}

export interface ChildRun {
  child_run_id: string;
  parent_child_run_id: string | null;
  response_id: string | null;
  name: string;
  status: string;
  usage: Usage | null;
  stoppable: boolean;
  created_at: string;
  updated_at: string;
}

export interface WorkspaceEntry {
  name: string;
  path: string;
  kind: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  modified_at: string;
}

export interface WorkspaceListing {
  path: string;
  entries: WorkspaceEntry[];
  page: number;
  limit: number;
  total: number;
  has_more: boolean;
}
