// Package engines is the contract between AstraBox and an Agent program: the Go API an
// outside team implements to run a new coding-agent program (Claude Code, Codex CLI, Pi,
// an ACP agent...) as an AstraBox Agent.
//
// The contract has two halves.
//
// The adapter side (EngineAdapter) declares what the program needs in a sandbox
// (EngineRuntimeCapabilities, EngineSandboxRequest, EngineStartupMaterialRequest) and starts
// or reconnects the program in a box the platform has prepared (ActivateRuntime on an
// EngineStartupContext, reaching the box only through the small Box interface).
//
// The runtime-client side (RuntimeClient) is one live connection to one running
// conversation. It hands the program inputs, reads its events, reports its state and
// passes on answers and interruptions. The program's runtime owns its conversation:
// whether it is working, which inputs it has taken, where each response starts and ends
// and which approvals it waits on are what the client reports through the closed Event
// set; AstraBox records those reports and never infers them.
//
// Browser output travels as Frame values: AI SDK UI Message Stream chunks (ai@7) with
// the presentation rules every Agent program shares (PublicFrame, response boundaries,
// interaction segments, retraction of previews, file changes, child runs).
//
// Adapters are registered explicitly on a Registry, which validates each declaration at
// start-up. Package enginetest holds the conformance suites an adapter's tests run.
//
// Vendor names and values stay unchanged throughout: if the program calls a setting
// approval_policy, the adapter exposes approval_policy. The JSON encodings of every type
// here are stable because the platform stores them (events, cursors and frames) in its
// database and recordings.
package engines
