package attempt

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/checkout"
	"github.com/drover-dev/drover/internal/transcript"
)

// Limits of what one report and one diff event carry; the rest is counted.
const (
	maxDiffInEvent  = 64 << 10
	maxTailInReport = 8 << 10
	maxFileEvents   = 1000
	maxToolsCounted = 100
)

// report assembles the report from what the phases found, as far as they
// went; failure nil means the attempt succeeded.
func (a *run) report(failure *adapter.Error) *event.Report {
	rep := &event.Report{Success: failure == nil, Sandbox: a.r.sandboxState(), SandboxDenied: a.box.denied()}
	if failure != nil {
		rep.Error = &event.ErrorInfo{Class: failure.Class, Category: failure.Category, Message: failure.Message,
			Recoverable: failure.Recoverable, Status: failure.Status, RetryAfterMS: failure.RetryAfter.Milliseconds(),
			ResetAt: failure.ResetAt}
	}
	if a.wt != nil {
		rep.Worktree = a.wt.Path
	}
	if e := a.exit; e != nil {
		rep.ExitCode, rep.Signal, rep.DurationMS = e.ExitCode, e.Signal, e.Duration().Milliseconds()
		rep.StdoutTail, rep.StderrTail = e.Stdout, e.Stderr
		rep.Usage, rep.Turns, rep.ToolCalls = usage(e.Usage), e.Turns, capTools(e.ToolCalls)
		rep.FinalText, rep.Refusals = tailString(e.FinalText, maxTailInReport), capStrings(e.Refusals, maxViolations)
	}
	if a.sum != nil {
		rep.Usage, rep.ToolCalls = usage(a.sum.Usage), toolCalls(a.sum.Events)
		rep.FinalText, rep.Unparsed = tailString(a.sum.FinalText, maxTailInReport), a.sum.Unparsed
	}
	if c := a.changes; c != nil {
		// Lists are bounded so an event stays well under the stream's
		// message size limit; the diff stat and the pushed branch have the
		// whole story.
		rep.FilesCreated, rep.FilesModified, rep.FilesDeleted = capList(c.Created), capList(c.Modified), capList(c.Deleted)
		rep.DiffSummary = c.DiffStat
	}
	rep.Verification, rep.ScopeViolations = a.verification, a.violations
	rep.Branch, rep.Commit, rep.CommitsCreated = a.branch, a.commit, a.commits
	rep.EventsObject, rep.LogObject, rep.LogBytes, rep.PatchObject = a.stored.events, a.stored.log, a.stored.logBytes, a.stored.patch
	rep.Credential = a.status.Credential
	return rep
}

// usage is what the CLI said it used, or nil when it said nothing; a
// count it did not state stays nil, unknown.
func usage(u transcript.Usage) *event.Usage {
	if u == (transcript.Usage{}) {
		return nil
	}
	return &event.Usage{Model: u.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, CostUSD: u.CostUSD}
}

// capTools keeps the counts of the first maxToolsCounted tools of a
// runtime's own count: a model may call tools that do not exist, under any
// name. Nil when there were none.
func capTools(counts map[string]int) map[string]int {
	var calls map[string]int
	for tool, n := range counts {
		if len(calls) == maxToolsCounted {
			break
		}
		if calls == nil {
			calls = map[string]int{}
		}
		calls[tool] = n
	}
	return calls
}

// toolCalls counts the tool calls by tool, for the first maxToolsCounted
// tools named; nil when there were none.
func toolCalls(events []transcript.Event) map[string]int {
	var calls map[string]int
	for _, e := range events {
		if e.Kind == transcript.KindToolCall && e.Tool != "" && len(calls) < maxToolsCounted {
			if calls == nil {
				calls = map[string]int{}
			}
			calls[e.Tool]++
		}
	}
	return calls
}

// emitChanges emits a file event per changed path, up to maxFileEvents,
// and the diff, cut to maxDiffInEvent.
func (r *Runner) emitChanges(ctx context.Context, emit Emitter, c *checkout.Changes) error {
	var files []Keyed
	for _, set := range []struct {
		kind  string
		paths []string
	}{{"created", c.Created}, {"modified", c.Modified}, {"deleted", c.Deleted}} {
		for _, p := range set.paths {
			if len(files) < maxFileEvents {
				files = append(files, Keyed{Key: p, Data: event.FileModifiedData{Path: p, Change: set.kind}})
			}
		}
	}
	if err := emitAll(ctx, emit, event.FileModified, files); err != nil {
		return err
	}
	d := event.DiffComputedData{
		Created: capList(c.Created), Modified: capList(c.Modified), Deleted: capList(c.Deleted), Stat: tailString(c.DiffStat, maxDiffInEvent),
		Diff: c.Diff, DiffBytes: len(c.Diff),
	}
	if len(d.Diff) > maxDiffInEvent {
		d.Diff, d.DiffTruncated = d.Diff[:maxDiffInEvent], true
	}
	return emit.Emit(ctx, event.DiffComputed, "", d)
}

// emitAll emits events of typ, at once where emit can.
func emitAll(ctx context.Context, emit Emitter, typ event.Type, events []Keyed) error {
	if b, ok := emit.(BatchEmitter); ok && len(events) > 0 {
		return b.EmitAll(ctx, typ, events)
	}
	return EmitEach(ctx, emit, typ, events)
}

// EmitEach emits events of typ one after the other, as an Emitter that
// cannot batch them does.
func EmitEach(ctx context.Context, emit Emitter, typ event.Type, events []Keyed) error {
	for _, e := range events {
		if err := emit.Emit(ctx, typ, e.Key, e.Data); err != nil {
			return err
		}
	}
	return nil
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// capList keeps the first maxFileEvents paths of a list.
func capList(paths []string) []string {
	if len(paths) > maxFileEvents {
		return paths[:maxFileEvents]
	}
	return paths
}

// stored names the artifacts put in the object store.
type stored struct {
	events, log, patch string
	logBytes           int64
}

// artifactName names one artifact of the job's claim: ATTEMPT/eEPOCH/FILE.
func artifactName(job *Job, file string) string {
	return fmt.Sprintf("%s/e%d/%s", job.Attempt, job.Epoch, file)
}

// storeArtifacts uploads the parsed output events, the full log and the
// patch. They are best effort: the report says what was stored, and a
// failure to store loses no state.
func (a *run) storeArtifacts(ctx context.Context) {
	r, job, sum := a.r, a.job, a.sum
	if r.Artifacts == nil {
		return
	}
	if sum != nil && len(sum.Events) > 0 {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		for _, e := range sum.Events {
			_ = enc.Encode(outputEvent{Kind: string(e.Kind), Stream: streamName(e.Stream), Text: e.Text, Tool: e.Tool, Input: e.Input, IsError: e.IsError})
		}
		name := artifactName(job, "events.jsonl")
		if _, err := r.Artifacts.Put(ctx, name, strings.NewReader(r.Redact.String(b.String()))); err != nil {
			r.Logger.Warn("store parsed events", "attempt", job.Attempt, "err", err)
		} else {
			a.stored.events = name
		}
	}
	if f, err := os.Open(a.logPath); err == nil {
		name := artifactName(job, "output.log")
		if n, err := r.Artifacts.Put(ctx, name, f); err != nil {
			r.Logger.Warn("store output log", "attempt", job.Attempt, "err", err)
		} else {
			a.stored.log, a.stored.logBytes = name, n
		}
		f.Close()
	}
	if diff := a.changes.Diff; diff != "" {
		name := artifactName(job, "diff.patch")
		if _, err := r.Artifacts.Put(ctx, name, strings.NewReader(r.Redact.String(diff))); err != nil {
			r.Logger.Warn("store patch", "attempt", job.Attempt, "err", err)
		} else {
			a.stored.patch = name
		}
	}
}

// outputEvent is one normalised event of the CLI's output, as stored.
type outputEvent struct {
	Kind    string          `json:"kind"`
	Stream  string          `json:"stream"`
	Text    string          `json:"text,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	IsError bool            `json:"is_error,omitempty"`
}

func streamName(s transcript.Stream) string {
	if s == transcript.Stderr {
		return "stderr"
	}
	return "stdout"
}
