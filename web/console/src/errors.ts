import { ApiError } from '@astrabox/client';

// The refusals a person meets in the console, said in their terms.
export function explain(err: unknown, action = ''): string {
  if (err instanceof ApiError) {
    switch (err.code) {
      case 'SESSION_BUSY':
        return `The agent is working in this conversation, so it cannot be ${action || 'changed'} now. Interrupt the response or wait for it to finish, then try again.`;
      case 'PENDING_INPUTS_NOT_CANCELLED': {
        const n = ((err.data as { input_ids?: string[] } | null)?.input_ids ?? []).length;
        return `Nothing is running to interrupt: ${n === 1 ? 'your message is' : `${n} messages are`} queued for the agent and will still be answered. Interrupt stops a running response; it never withdraws queued messages.`;
      }
      case 'UNAUTHORIZED':
        return 'Your token is unknown, revoked or expired. Sign in again.';
      case 'WORKSPACE_UNAVAILABLE':
        return 'The workspace is not running right now (the agent’s box is released when idle). Send a message to start it again.';
      case 'INTERACTION_NOT_OPEN':
        return 'This request was already answered, withdrawn or expired.';
      case 'ADMISSION_DENIED':
        return `Not accepted now: ${err.message}`;
      case 'AGENT_RUNTIME_ERROR':
        return `The agent cannot run: ${err.message}`;
      case 'SERVICE_UNAVAILABLE':
        return 'AstraBox is briefly unavailable. Try again in a few seconds.';
    }
    return err.message;
  }
  if (err instanceof TypeError) return 'The network is unreachable. It will be tried again when the connection returns.';
  return err instanceof Error ? err.message : String(err);
}
