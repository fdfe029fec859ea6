package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/supervise"
)

func (s *Set) bash(ctx context.Context, input json.RawMessage) Outcome {
	a, err := parseArgs(input)
	if err != nil {
		return failf("%v", err)
	}
	command, err := a.str("command", true)
	if err != nil {
		return failf("%v", err)
	}
	if strings.TrimSpace(command) == "" {
		return failf("the command is empty")
	}
	secs, given, err := a.int("timeout")
	if err != nil {
		return failf("%v", err)
	}
	timeout := s.lim.CommandTimeout
	if given {
		if secs < 1 {
			return failf("timeout is in seconds and must be at least 1")
		}
		timeout = min(time.Duration(min(secs, 1<<30))*time.Second, s.lim.CommandMaxTimeout)
	}
	if d, ok := ctx.Deadline(); ok {
		// The command must not outlive the attempt's budget: end it a
		// little before, so the loop reports the budget, not a kill.
		if left := time.Until(d); left < timeout {
			timeout = max(left, time.Millisecond)
		}
	}
	spec := supervise.Spec{
		Path: s.shell,
		// stderr joins stdout so the model reads both in order, as on a terminal.
		Args:       []string{"-c", "exec 2>&1\n" + command},
		Dir:        s.dir,
		Env:        append([]string(nil), s.cfg.Env...),
		Timeout:    timeout,
		Grace:      s.lim.Grace,
		MaxCapture: int64(s.lim.CommandOutput),
		Limits:     s.lim.Process,
	}
	if s.cfg.Sandbox != nil {
		if err := s.cfg.Sandbox.Wrap(&spec); err != nil {
			return failf("the command could not be sandboxed, so it did not run: %v", err)
		}
	}
	res, err := supervise.Run(ctx, spec)
	if err != nil {
		return failf("the command could not start: %v", err)
	}
	co := &CommandOutcome{ExitCode: res.ExitCode, Outcome: string(res.Outcome), Duration: res.Duration()}
	out := res.Stdout.String() + res.Stderr.String()
	var status string
	isErr := true
	switch res.Outcome {
	case supervise.Exited:
		status = fmt.Sprintf("[exit code %d]", res.ExitCode)
		isErr = res.ExitCode != 0
	case supervise.TimedOut:
		status = fmt.Sprintf("[timed out after %s; the command and everything it started were killed]", timeout.Round(time.Millisecond))
	case supervise.Stopped:
		status = "[stopped: the attempt is ending]"
	default:
		status = "[killed by signal " + res.Signal + "]"
	}
	if res.Stdout.Truncated {
		status += fmt.Sprintf(" [output cut: %d bytes in all, the middle left out]", res.Stdout.Total)
	}
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return Outcome{Content: out + status, IsError: isErr, Command: co}
}
