package devmodel

import (
	"encoding/json"
	"fmt"
	"strings"
)

// bashCall builds one shell call per cmd= argument for whichever shell tool the
// program offers: Claude Code's Bash, Pi's bash, Codex's exec_command or shell,
// Gemini CLI's and Qwen Code's run_shell_command. With escalate=true a Codex
// exec_command asks to run outside Codex's own sandbox, which makes Codex ask for
// approval under its on-request policy.
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
