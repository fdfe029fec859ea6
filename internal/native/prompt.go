package native

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/drover-dev/drover/internal/flow"
)

// systemPrompt tells the model where it is and how an attempt ends. It is
// deliberately short and plain: it must work for any model, and the task
// itself comes as the first user message.
func systemPrompt(dir string, sc *flow.Scope, b Budget) string {
	var s strings.Builder
	fmt.Fprintf(&s, `You are a coding agent running headless inside Drover, a job system. You work in a git worktree at %s; paths are relative to it.

Do the task you are given with the tools: read, search, create and edit files, and run commands (builds, tests) with bash. Nobody will answer questions, so decide for yourself and keep going until the task is done. Look before you change: read the code you are about to edit.

Do not push or switch branches, and commit only if the task asks you to: Drover records every change you make in the worktree and commits it for you.
`, dir)
	if sc != nil && (len(sc.Allow) > 0 || len(sc.Deny) > 0) {
		s.WriteString("\nThis task may change only ")
		if len(sc.Allow) > 0 {
			a, _ := json.Marshal(sc.Allow)
			s.WriteString("paths matching " + string(a))
		} else {
			s.WriteString("any path")
		}
		if len(sc.Deny) > 0 {
			d, _ := json.Marshal(sc.Deny)
			s.WriteString(", except those matching " + string(d))
		}
		s.WriteString(". The file tools refuse other changes, and a change made another way fails the task.\n")
	}
	var limits []string
	if b.Turns > 0 {
		limits = append(limits, fmt.Sprintf("%d turns (answers from you)", b.Turns))
	}
	if b.Time > 0 {
		limits = append(limits, fmt.Sprintf("%s of time", b.Time))
	}
	if b.Tokens > 0 {
		limits = append(limits, fmt.Sprintf("%d tokens", b.Tokens))
	}
	if len(limits) > 0 {
		s.WriteString("\nYou have at most " + strings.Join(limits, ", ") + ": use several tools in one turn when they do not depend on each other.\n")
	}
	s.WriteString("\nWhen the task is done, answer with a short summary of what you changed and why, and no tool call: that ends your work.\n")
	return s.String()
}
