package devmodel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// bashCall builds one shell call per cmd= argument for whichever shell tool the
// program offers: Claude Code's Bash, Pi's bash, Codex's exec_command or shell,
// Gemini CLI's and Qwen Code's run_shell_command. With escalate=true a Codex
// exec_command asks to run outside Codex's own sandbox, which makes Codex ask for
// approval under its on-request policy; with escalate=true DeepSeek Harness's bash
// asks to leave its sandbox, which makes it ask for approval.
func bashCall(d directive, conv *conversation) ([]toolCall, error) {
	cmds := d.all("cmd")
	if len(cmds) == 0 {
		return nil, fmt.Errorf("bash needs cmd=")
	}
	name, ok := conv.offers("Bash", "bash", "exec_command", "shell", "run_shell_command")
	if !ok {
		return nil, nil
	}
	escalate := d.str("escalate", "") == "true"
	calls := make([]toolCall, 0, len(cmds))
	for _, cmd := range cmds {
		var args any
		switch name {
		case "Bash":
			args = map[string]string{"command": cmd, "description": d.str("description", "Run scripted command")}
		case "exec_command":
			if escalate {
				args = map[string]string{"cmd": cmd, "sandbox_permissions": "require_escalated",
					"justification": d.str("description", "Run scripted command")}
			} else {
				args = map[string]string{"cmd": cmd}
			}
		case "run_shell_command":
			args = map[string]any{"command": cmd, "is_background": false, "description": d.str("description", "Run scripted command")}
		case "shell":
			args = map[string][]string{"command": {"bash", "-lc", cmd}}
		default:
			args = map[string]string{"command": cmd}
		}
		if name == "bash" && conv.dshContext {
			// DeepSeek Harness's bash requires a description.
			a := map[string]string{"command": cmd, "description": d.str("description", "Run scripted command")}
			if escalate {
				a["sandbox_permissions"] = "danger-full-access"
				a["justification"] = d.str("description", "Run scripted command")
			}
			args = a
		}
		calls = append(calls, jsonCall(name, args))
	}
	return calls, nil
}

// writeCall builds a file write for Claude Code's Write, Pi's write, or Codex's
// apply_patch (freeform or function), whichever the program offers.
func writeCall(d directive, conv *conversation) ([]toolCall, error) {
	path := d.str("path", "")
	if path == "" {
		return nil, fmt.Errorf("write needs path=")
	}
	content := d.str("content", "written by the scripted model\n")
	name, ok := conv.offers("Write", "write", "apply_patch")
	if !ok {
		return nil, nil
	}
	switch {
	case name == "apply_patch":
		var patch strings.Builder
		patch.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
		for _, line := range strings.SplitAfter(strings.TrimSuffix(content, "\n"), "\n") {
			patch.WriteString("+" + strings.TrimSuffix(line, "\n") + "\n")
		}
		patch.WriteString("*** End Patch\n")
		if conv.customTools[name] {
			return []toolCall{{name: name, arguments: patch.String(), freeform: true}}, nil
		}
		return []toolCall{jsonCall(name, map[string]string{"input": patch.String()})}, nil
	case name == "Write":
		return []toolCall{jsonCall(name, map[string]string{"file_path": path, "content": content})}, nil
	default:
		return []toolCall{jsonCall(name, map[string]string{"path": path, "content": content})}, nil
	}
}

func jsonCall(name string, args any) toolCall {
	b, err := json.Marshal(args)
	if err != nil {
		// The arguments are maps of strings, which always marshal.
		panic(fmt.Sprintf("marshal tool arguments: %v", err))
	}
	return toolCall{name: name, arguments: string(b)}
}

// taskCall builds one sub-agent call for Claude Code's Task (Agent in later
// releases). The sub-agent's own request has no directive, so it gets the default
// reply to its prompt.
func taskCall(d directive, conv *conversation) ([]toolCall, error) {
	prompt := d.str("prompt", "")
	if prompt == "" {
		return nil, fmt.Errorf("task needs prompt=")
	}
	name, ok := conv.offers("Task", "Agent")
	if !ok {
		return nil, nil
	}
	args := map[string]string{"description": d.str("description", "Scripted sub-agent"), "prompt": prompt}
	if kind := d.str("subagent_type", ""); kind != "" {
		args["subagent_type"] = kind
	}
	return []toolCall{jsonCall(name, args)}, nil
}

// toolSearchName is the tool through which Claude Code loads deferred tools (MCP
// tools among them) before the model may call them.
const toolSearchName = "ToolSearch"

// namedToolPlan calls the tool named name= with the JSON object args= (default {}),
// then replies final= (default "Tool finished: <last line of the result>"). An MCP
// tool is offered under a qualified name (Claude Code's mcp__<server>__<tool>), so a
// name the program does not offer as such matches the offered tool ending in
// "__"+name, or "<server>__"+name when server= is given (a tool offered inside a
// Responses namespace is listed as "<namespace>__<tool>", Codex's mcp__<server> form,
// and called by its name in that namespace).
// When the program defers the
// tool behind its tool search, the model first searches for it, as a real model
// does, and calls it once the program offers it.
func namedToolPlan(d directive, t turn, conv *conversation) (plan, error) {
	name := d.str("name", "")
	if name == "" {
		return plan{}, fmt.Errorf("tool needs name=")
	}
	args := d.str("args", "{}")
	var obj map[string]any
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return plan{}, fmt.Errorf("args must be a JSON object: %s", args)
	}
	server := d.str("server", "")
	suffix := "__" + name
	if server != "" {
		suffix = server + suffix
	}
	final := func() plan { return textPlan(d.name, d.str("final", "Tool finished: "+lastLine(t.lastResult))) }
	// The offered tool: one qualified by the server (Claude Code's and Codex's
	// <...>__<server>__<tool>, Qwen Code's <server>__<tool> on a name clash, opencode's
	// <server>_<tool>), else one offered under the tool's own name (Qwen Code without
	// a clash).
	offered := slices.IndexFunc(conv.tools, func(have string) bool {
		return (server == "" && have == name) || strings.HasSuffix(have, suffix) || (server != "" && have == server+"_"+name)
	})
	if offered < 0 && server != "" {
		offered = slices.Index(conv.tools, name)
	}
	for i, have := range conv.tools {
		if i != offered {
			continue
		}
		call := toolCall{name: have, arguments: args, freeform: conv.customTools[have]}
		if nt, ok := conv.namespaced[have]; ok {
			call.name, call.namespace = nt.name, nt.namespace
		}
		if conv.calledThisTurn(call.name) {
			return final(), nil
		}
		return plan{blocks: []block{{kind: blockToolCall, call: call}}, toolUse: true}, nil
	}
	if search, ok := conv.offers(toolSearchName); ok && !conv.calledThisTurn(search) {
		query := name
		if server != "" {
			query = "select:mcp__" + server + "__" + name
		}
		call := jsonCall(search, map[string]any{"query": query, "max_results": 5})
		return plan{blocks: []block{{kind: blockToolCall, call: call}}, toolUse: true}, nil
	}
	if slices.Contains(conv.tools, clientToolSearch) && !conv.calledThisTurn(clientToolSearch) {
		// The Responses API's client tool search ranks tools by words (BM25).
		call := jsonCall(clientToolSearch, map[string]any{"query": strings.TrimSpace(name + " " + server), "limit": 5})
		call.search = true
		return plan{blocks: []block{{kind: blockToolCall, call: call}}, toolUse: true}, nil
	}
	return textPlan(d.name, fmt.Sprintf("No suitable tool is offered for script %s (offered: %s).", d.name, strings.Join(conv.tools, ", "))), nil
}
