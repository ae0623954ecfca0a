package devmodel

import (
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestFindDirectiveParsesArguments(t *testing.T) {
	t.Parallel()
	d, rest, ok, err := findDirective("please [[script:bash cmd=\"echo \\\"a b\\\"\" cmd=`ls -l` flag description=plain]] now")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "bash", d.name)
	require.Equal(t, []string{`echo "a b"`, "ls -l"}, d.all("cmd"))
	require.Equal(t, "true", d.str("flag", ""))
	require.Equal(t, "plain", d.str("description", ""))
	require.Equal(t, "please  now", rest)
}

func TestFindDirectiveTakesTheLastOne(t *testing.T) {
	t.Parallel()
	d, rest, ok, err := findDirective("[[script:text text=one]] then [[script:slow chunks=3]]")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "slow", d.name)
	require.Equal(t, "then", rest)
}

func TestFindDirectiveReportsMistakes(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"[[script:]]", "[[script:bash cmd=\"open", "[[script:bash cmd=`x", "[[script:text"} {
		_, _, _, err := findDirective(text)
		require.Error(t, err, text)
	}
	_, _, ok, err := findDirective("no directive here")
	require.NoError(t, err)
	require.False(t, ok)
}

func TestDecideDefaultsAndErrors(t *testing.T) {
	t.Parallel()
	s := newScripter(time.Millisecond)
	conv := &conversation{model: "m"}
	conv.addPrompt("<environment_context>cwd</environment_context>")
	conv.addPrompt("just   say\nhi")
	p := s.decide(conv)
	require.Equal(t, ScriptText, p.script)
	require.Equal(t, "Scripted reply to: just say hi", p.blocks[0].text())

	conv = &conversation{model: "m"}
	conv.addPrompt("[[script:nope]]")
	require.Equal(t, "Script error: nope: unknown script \"nope\"", s.decide(conv).blocks[0].text())

	conv = &conversation{model: "m"}
	conv.addPrompt("[[script:bash cmd=ls]]")
	p = s.decide(conv)
	require.Contains(t, p.blocks[0].text(), "No suitable tool is offered")
}

func TestErrorTimesCountsPerTurn(t *testing.T) {
	t.Parallel()
	s := newScripter(time.Millisecond)
	conv := &conversation{model: "m"}
	conv.addPrompt("[[script:error status=503 times=2 retry_after=1500ms]]")
	for i := range 2 {
		p := s.decide(conv)
		require.NotNil(t, p.err, "request %d fails", i)
		require.Equal(t, 503, p.err.status)
		require.Equal(t, 1500*time.Millisecond, p.err.retryAfter)
	}
	p := s.decide(conv)
	require.Nil(t, p.err)
	require.Equal(t, "Recovered after 2 scripted errors.", p.blocks[0].text())

	always := &conversation{model: "m"}
	always.addPrompt("[[script:error status=400]]")
	for range 3 {
		require.NotNil(t, s.decide(always).err)
	}
}

func TestBashAdaptsToTheOfferedShellTool(t *testing.T) {
	t.Parallel()
	s := newScripter(time.Millisecond)
	for tool, want := range map[string]string{
		"Bash":         `{"command":"make","description":"Run scripted command"}`,
		"bash":         `{"command":"make"}`,
		"exec_command": `{"cmd":"make"}`,
		"shell":        `{"command":["bash","-lc","make"]}`,
	} {
		conv := &conversation{model: "m", tools: []string{"read", tool}}
		conv.addPrompt("[[script:bash cmd=make]]")
		p := s.decide(conv)
		require.True(t, p.toolUse, tool)
		require.Equal(t, tool, p.blocks[0].call.name)
		require.JSONEq(t, want, p.blocks[0].call.arguments, tool)
	}
}

func TestSlowSplitsIntoPacedChunks(t *testing.T) {
	t.Parallel()
	s := newScripter(42 * time.Millisecond)
	conv := &conversation{model: "m"}
	conv.addPrompt(`[[script:slow chunks=4 text="abcdefgh"]]`)
	p := s.decide(conv)
	require.Equal(t, 42*time.Millisecond, p.delay)
	require.Equal(t, []string{"ab", "cd", "ef", "gh"}, p.blocks[0].chunks)
}

func TestJSONPiecesKeepCharactersWhole(t *testing.T) {
	t.Parallel()
	args := `{"content":"ééééééééé"}`
	pieces := jsonPieces(args)
	joined := ""
	for _, p := range pieces {
		require.True(t, utf8.ValidString(p), p)
		joined += p
	}
	require.Equal(t, args, joined)
}

func TestCutKeepsCharactersWhole(t *testing.T) {
	t.Parallel()
	require.Equal(t, "ab…", cut("abcdef", 2))
	require.Equal(t, "é…", cut("éé", 3))
	require.Equal(t, "short", cut("short", 10))
}

func TestDirectiveRoundTrips(t *testing.T) {
	t.Parallel()
	cmd := "printf 'a\\tb\\n' > \"out file.txt\" && echo ]] done\nsecond line"
	text := "run " + Directive("bash", "cmd", cmd, "cmd", "ls", "final", "ok")
	d, rest, ok, err := findDirective(text)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "run", rest)
	require.Equal(t, []string{cmd, "ls"}, d.all("cmd"))
	require.Equal(t, "ok", d.str("final", ""))
}

func TestToolScriptCallsANamedToolAndItsQualifiedForm(t *testing.T) {
	t.Parallel()
	s := newScripter(time.Millisecond)
	conv := &conversation{model: "m", tools: []string{"Bash", "mcp__other__echo", "mcp__files__echo"}}
	conv.addPrompt("[[script:tool name=echo server=files args=`{\"text\":\"hi\"}` final=done]]")
	p := s.decide(conv)
	require.True(t, p.toolUse)
	require.Equal(t, "mcp__files__echo", p.blocks[0].call.name)
	require.Equal(t, `{"text":"hi"}`, p.blocks[0].call.arguments)

	conv.addAssistant("[tool_call mcp__files__echo]")
	conv.addToolResult("mcp-echo: hi")
	p = s.decide(conv)
	require.False(t, p.toolUse)
	require.Equal(t, "done", p.blocks[0].text())

	// A deferred tool is searched for first, then called once offered.
	conv = &conversation{model: "m", tools: []string{"Bash", "ToolSearch"}}
	conv.addPrompt("[[script:tool name=echo server=files]]")
	p = s.decide(conv)
	require.Equal(t, "ToolSearch", p.blocks[0].call.name)
	require.JSONEq(t, `{"query":"select:mcp__files__echo","max_results":5}`, p.blocks[0].call.arguments)
	conv.addAssistant("[tool_use ToolSearch]")
	conv.addToolResult("")
	conv.tools = append(conv.tools, "mcp__files__echo")
	p = s.decide(conv)
	require.Equal(t, "mcp__files__echo", p.blocks[0].call.name)
	require.Equal(t, `{}`, p.blocks[0].call.arguments)
	conv.addAssistant("[tool_use mcp__files__echo]")
	conv.addToolResult("mcp-echo: \nlast")
	p = s.decide(conv)
	require.Equal(t, "Tool finished: last", p.blocks[0].text())

	conv = &conversation{model: "m", tools: []string{"Bash"}}
	conv.addPrompt("[[script:tool name=echo]]")
	require.Contains(t, s.decide(conv).blocks[0].text(), "No suitable tool is offered")

	conv = &conversation{model: "m", tools: []string{"echo"}}
	conv.addPrompt("[[script:tool name=echo args=`[1]`]]")
	require.Contains(t, s.decide(conv).blocks[0].text(), "Script error: tool: args must be a JSON object")
}

func TestToolScriptSearchesCodexDeferredToolsAndCallsThemInTheirNamespace(t *testing.T) {
	t.Parallel()
	s := newScripter(time.Millisecond)
	conv, err := responsesFormat{}.parse([]byte(`{"model":"m","tools":[{"type":"function","name":"exec_command"},{"type":"tool_search"}],
		"input":[{"type":"message","role":"user","content":"[[script:tool name=echo server=files]]"}]}`))
	require.NoError(t, err)
	p := s.decide(conv)
	require.True(t, p.blocks[0].call.search, "a client tool search first")
	require.JSONEq(t, `{"query":"echo files","limit":5}`, p.blocks[0].call.arguments)

	conv, err = responsesFormat{}.parse([]byte(`{"model":"m","tools":[{"type":"function","name":"exec_command"},{"type":"tool_search"}],
		"input":[{"type":"message","role":"user","content":"[[script:tool name=echo server=files]]"},
		{"type":"tool_search_call","call_id":"c1","execution":"client","arguments":{"query":"echo files"}},
		{"type":"tool_search_output","call_id":"c1","execution":"client","tools":[{"type":"namespace","name":"mcp__files","tools":[{"type":"function","name":"echo"}]}]}]}`))
	require.NoError(t, err)
	p = s.decide(conv)
	require.Equal(t, toolCall{name: "echo", arguments: "{}", namespace: "mcp__files"}, p.blocks[0].call)
	item := responsesToolItem(p.blocks[0].call)
	require.Equal(t, "mcp__files", item.done["namespace"])
}
