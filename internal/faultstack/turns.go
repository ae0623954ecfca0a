package faultstack

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/internal/devmodel"
)

// Turn is a message and the exact reply text the scripted model gives it
// (docs/devmodel.md): the replies are deterministic, so a test compares the
// whole text, and a repeated or lost piece shows.
type Turn struct {
	Content string
	Reply   string
	// Tool is set when the reply runs a shell command first.
	Tool bool
}

// TextTurn is answered at once with one text.
func TextTurn(tag string) Turn {
	reply := "Reply " + tag + ": done."
	return Turn{Content: "Say it. " + devmodel.Directive("text", "text", reply), Reply: reply}
}

// SlowTurn is answered with words words in chunks deltas, delay apart, so a
// fault can land while it streams.
func SlowTurn(tag string, words, chunks int, delay time.Duration) Turn {
	parts := make([]string, words)
	for i := range parts {
		parts[i] = "w" + strconv.Itoa(i+1)
	}
	reply := fmt.Sprintf("Slow reply %s: %s.", tag, strings.Join(parts, " "))
	return Turn{
		Content: "Explain slowly. " + devmodel.Directive("slow", "chunks", strconv.Itoa(chunks), "delay", delay.String(), "text", reply),
		Reply:   reply,
	}
}

// BashTurn runs one shell command in the box, then answers with a fixed text.
func BashTurn(tag, command string) Turn {
	reply := "Ran " + tag + "."
	return Turn{Content: "Run it. " + devmodel.Directive("bash", "cmd", command, "final", reply), Reply: reply, Tool: true}
}
