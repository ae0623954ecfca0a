package api

import "github.com/gin-gonic/gin"

// route is one public API route; the OpenAPI document is generated from the same table,
// so every route is described.
type route struct {
	method  string
	path    string // Gin syntax, relative to /api/v1
	summary string
	handler func(*Server) gin.HandlerFunc
}

func h(f func(*Server, *gin.Context)) func(*Server) gin.HandlerFunc {
	return func(s *Server) gin.HandlerFunc { return func(c *gin.Context) { f(s, c) } }
}

// apiRoutes is the public API under /api/v1. Every route needs a bearer token; the
// share link viewers' routes, which take none, are sharedRoutes.
var apiRoutes = []route{
	{"GET", "/me", "Read the caller's user and the token the request used", h((*Server).getMe)},
	{"POST", "/admin/users", "Create a user (admin)", h((*Server).createUser)},
	{"GET", "/admin/users", "List users (admin)", h((*Server).listUsers)},
	{"GET", "/admin/users/:user_id", "Get a user (admin)", h((*Server).getUser)},
	{"POST", "/admin/users/:user_id/disable", "Disable a user: their tokens and share links stop working at once (admin)", h((*Server).disableUser)},
	{"POST", "/admin/users/:user_id/enable", "Enable a disabled user again (admin)", h((*Server).enableUser)},
	{"POST", "/admin/users/:user_id/tokens", "Issue an API token with a name and an optional expiry; the secret is shown once (admin)", h((*Server).issueToken)},
	{"GET", "/admin/users/:user_id/tokens", "List a user's API tokens, without secrets (admin)", h((*Server).listTokens)},
	{"POST", "/admin/users/:user_id/tokens/:token_id/revoke", "Revoke an API token (admin)", h((*Server).revokeToken)},

	{"POST", "/runtime-profiles", "Create a RuntimeProfile (admin)", h((*Server).createProfile)},
	{"GET", "/runtime-profiles", "List the RuntimeProfiles Agents may select (include_disabled=true: all, admin)", h((*Server).listProfiles)},
	{"GET", "/runtime-profiles/:profile_id", "Get a RuntimeProfile", h((*Server).getProfile)},
	{"PATCH", "/runtime-profiles/:profile_id", "Update a RuntimeProfile (admin)", h((*Server).updateProfile)},
	{"POST", "/runtime-profiles/:profile_id/enable", "Enable a RuntimeProfile (admin)", h((*Server).enableProfile)},
	{"POST", "/runtime-profiles/:profile_id/disable", "Disable a RuntimeProfile (admin)", h((*Server).disableProfile)},

	{"POST", "/agents", "Create an Agent", h((*Server).createAgent)},
	{"GET", "/agents", "List Agents (config: creator and admins only, secret values redacted)", h((*Server).listAgents)},
	{"GET", "/agents/:agent_id", "Get an Agent (config: creator and admins only, secret values redacted)", h((*Server).getAgent)},
	{"PATCH", "/agents/:agent_id", "Update an Agent (creator or admin; send its current version)", h((*Server).updateAgent)},
	{"POST", "/agents/:agent_id/conversations", "Create a Session from an Agent (Idempotency-Key header)", h((*Server).createSession)},

	{"GET", "/sessions", "List Sessions (page=1&limit=N: paged; archived=true: archived ones)", h((*Server).listSessions)},
	{"GET", "/sessions/:session_id", "Get a Session's complete current details", h((*Server).getSession)},
	{"PATCH", "/sessions/:session_id", "Rename a Session (owner)", h((*Server).renameSession)},
	{"DELETE", "/sessions/:session_id", "Delete a Session (owner; 409 SESSION_BUSY while working)", h((*Server).deleteSession)},
	{"POST", "/sessions/:session_id/permission-mode", "Set the Session's permission mode (owner)", h((*Server).setPermissionMode)},
	{"POST", "/sessions/:session_id/read", "Mark the Session read (owner)", h((*Server).markRead)},
	{"POST", "/sessions/:session_id/archive", "Archive a Session (owner; 409 SESSION_BUSY while working)", h((*Server).archiveSession)},
	{"POST", "/sessions/:session_id/recover", "Recover a TERMINATED Session (owner)", h((*Server).recoverSession)},
	{"POST", "/sessions/:session_id/interrupt", "Interrupt the response in progress (owner)", h((*Server).interrupt)},
	{"POST", "/sessions/:session_id/inputs", "Send a message (owner); returns the receipt at once", h((*Server).sendInput)},
	{"GET", "/sessions/:session_id/stream", "Follow the Session's output (SSE, AI SDK UI Message Stream) after after_seq", h((*Server).streamSession)},
	{"GET", "/sessions/:session_id/messages", "Read the recorded conversation as UI messages, paging back with before", h((*Server).listMessages)},
	{"GET", "/sessions/:session_id/history-blocks", "Read the conversation with folded work as data-process-block headers", h((*Server).listHistoryBlocks)},
	{"GET", "/sessions/:session_id/history-blocks/:block_id", "Read the parts folded under one header (cursor=)", h((*Server).getHistoryBlock)},
	{"GET", "/sessions/:session_id/history-blocks/:block_id/process-summary", "Name the operations folded under one header (cursor=); status completed means label generation finished, response_completed is the response's own outcome", h((*Server).getProcessSummary)},
	{"POST", "/sessions/:session_id/interactions/:interaction_id/answer", "Answer an approval or question (owner)", h((*Server).answerInteraction)},
	{"POST", "/sessions/:session_id/shares", "Create a read-only share link with an expiry; the token is shown once (owner)", h((*Server).createShare)},
	{"GET", "/sessions/:session_id/shares", "List the Session's share links, without tokens (owner)", h((*Server).listShares)},
	{"POST", "/sessions/:session_id/shares/:share_id/revoke", "Revoke a share link (owner)", h((*Server).revokeShare)},
	{"GET", "/sessions/:session_id/workspace/files", "List a folder of the Session's workspace, paged (owner, admin; share links that allow downloads)", h((*Server).listWorkspace)},
	{"GET", "/sessions/:session_id/workspace/download", "Download a workspace file, or a folder as a tar or zip archive (owner, admin; share links that allow downloads)", h((*Server).downloadWorkspace)},
	{"POST", "/sessions/:session_id/workspace/files", "Upload files to the workspace: multipart into the folder path, or a raw body as the file path (owner)", h((*Server).uploadWorkspace)},
	{"GET", "/sessions/:session_id/terminal", "Open the Session's web terminal (WebSocket; after= replays from a byte offset) (owner)", h((*Server).openTerminal)},
	{"POST", "/sessions/:session_id/terminal/interrupt", "Interrupt the terminal's foreground command (owner); says whether one was running", h((*Server).interruptTerminal)},
	{"GET", "/sessions/:session_id/child-runs", "List the Session's child runs", h((*Server).listChildRuns)},
	{"GET", "/sessions/:session_id/child-runs/:child_run_id/messages", "Read a child run's messages", h((*Server).childRunMessages)},
	{"POST", "/sessions/:session_id/child-runs/:child_run_id/stop", "Ask the Agent program to stop a child run (owner)", h((*Server).stopChildRun)},
	{"GET", "/admin/sessions/:session_id/diagnostics", "Read the Session's kept runtime diagnostics, oldest first (admin)", h((*Server).listDiagnostics)},
	{"POST", "/admin/sessions/:session_id/history-import", "Import a Session's earlier history, for reading only (admin)", h((*Server).importHistory)},
}

// routes registers the public API on g.
func (s *Server) routes(g *gin.RouterGroup) {
	for _, r := range apiRoutes {
		g.Handle(r.method, r.path, r.handler(s))
	}
}

// sharedRoutes registers share link viewers' routes on g.
func (s *Server) sharedRoutes(g *gin.RouterGroup) {
	for _, r := range sharedRoutes {
		g.Handle(r.method, r.path, r.handler(s))
	}
}
