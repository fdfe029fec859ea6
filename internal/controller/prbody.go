package controller

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/dustin/go-humanize"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
)

// What a flow's pull request says: its title, and a body listing each
// task with its runtime, attempts, checks, tokens and cost, what is
// missing when only part of the flow is published, the review rounds, and
// a link to the flow in the console when console.url is set. Everything
// comes from the projection and the configuration, no clock, so the same
// state writes the same body (a decision made twice asks for the same).

// prTitle is the pull request's title.
func prTitle(f *projection.Flow) string {
	if pr := f.Publish.PullRequest; pr != nil && pr.Title != "" {
		return pr.Title
	}
	return f.Spec.Name
}

// flowLink is the flow's page in the console, "" without console.url.
func flowLink(cfg *config.Config, flowID string) string {
	if cfg.Console.URL == "" {
		return ""
	}
	return strings.TrimSuffix(cfg.Console.URL, "/") + "/ui/flows/" + flowID
}

// prBody is the pull request's body.
func prBody(cfg *config.Config, st *projection.State, f *projection.Flow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Drover flow `%s`", f.ID)
	if link := flowLink(cfg, f.ID); link != "" {
		fmt.Fprintf(&b, " ([console](%s))", link)
	}
	fmt.Fprintf(&b, ": %s.\n\n", f.State)
	b.WriteString("| task | runtime | attempts | checks | tokens | cost |\n| --- | --- | --- | --- | --- | --- |\n")
	var missing []string
	for _, t := range st.FlowTasks(f) {
		a := st.Attempts[t.Attempt]
		runtime := t.Runtime
		if a != nil {
			runtime = a.Runtime
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s |\n", t.ID, mdCell(runtime, 64), t.Attempts, checksOf(a),
			tokensOf(t.Spend), costOf(cfg, t.Spend))
		if t.State != drovertype.TaskSucceeded {
			why := string(t.State)
			if t.Error != nil {
				why += ": " + mdCell(string(t.Error.Class)+" "+t.Error.Message, 200)
			}
			missing = append(missing, fmt.Sprintf("- `%s` %s", t.ID, why))
		}
	}
	fmt.Fprintf(&b, "| **all** | | | | %s | %s |\n", tokensOf(f.Spend), costOf(cfg, f.Spend))
	if len(missing) > 0 {
		b.WriteString("\n**Not in this pull request** (the flow failed in part; `on: partial` published what succeeded):\n")
		b.WriteString(strings.Join(missing, "\n") + "\n")
	}
	if f.PR != nil && len(f.PR.Rounds) > 0 {
		b.WriteString("\nReview rounds:\n")
		for _, r := range f.PR.Rounds {
			fmt.Fprintf(&b, "- round %d (%s): %s, tasks %s\n", r.N, strings.Join(r.Kinds, ", "), r.State, strings.Join(r.Tasks, ", "))
		}
	}
	fmt.Fprintf(&b, "\n<!-- drover:flow=%s -->\n", f.ID)
	return b.String()
}

// checksOf says what an attempt's checks found.
func checksOf(a *projection.Attempt) string {
	if a == nil || a.Verification == nil {
		return "none"
	}
	v := a.Verification
	var parts []string
	if len(v.Commands) > 0 {
		verdict := "passed"
		for _, c := range v.Commands {
			if c.ExitCode != 0 || c.TimedOut {
				verdict = "failed"
			}
		}
		parts = append(parts, fmt.Sprintf("verify %s", verdict))
	}
	if r := v.Review; r != nil {
		verdict := "passed"
		if !r.Passed {
			verdict = "failed"
		}
		parts = append(parts, "review "+verdict)
	}
	if len(v.ScopeViolations) > 0 {
		parts = append(parts, "scope violated")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func tokensOf(sp *projection.Spend) string {
	if sp == nil || sp.Tokens == 0 {
		return "–"
	}
	return humanize.Comma(sp.Tokens)
}

func costOf(cfg *config.Config, sp *projection.Spend) string {
	c := CostOf(cfg, sp)
	if c.USD == 0 {
		return "–"
	}
	s := fmt.Sprintf("$%.4f", c.USD)
	if c.Estimated > 0 {
		s += " (est.)"
	}
	return s
}

// mdCell makes outside text safe in a markdown table cell: one line, at
// most max bytes, no pipe, no HTML.
func mdCell(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '|' || r == '<' || r == '>' || r == '`':
			return '\''
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// roundComment is what a round's update says on the pull request: what
// was done, by which runtime, at what cost.
func roundComment(cfg *config.Config, st *projection.State, f *projection.Flow, r *projection.ReviewRound) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Drover round %d** (%s): %s", r.N, strings.Join(r.Kinds, ", "), r.State)
	if r.Commit != "" {
		fmt.Fprintf(&b, ", pushed %s to this branch", shortCommit(r.Commit))
	}
	b.WriteString(".\n\n")
	for _, id := range r.Tasks {
		t := st.Task(f.ID, id)
		if t == nil {
			continue
		}
		a := st.Attempts[t.Attempt]
		runtime := t.Runtime
		if a != nil {
			runtime = a.Runtime
		}
		fmt.Fprintf(&b, "- `%s` by %s, %d attempt(s), %s tokens, %s: %s", id, mdCell(runtime, 64), t.Attempts, tokensOf(t.Spend),
			costOf(cfg, t.Spend), t.State)
		if a != nil && a.Report != nil {
			if files := changedFiles(a); files != "" {
				b.WriteString("; changed " + files)
			}
			if msg := firstLine(a.Report.FinalText); msg != "" {
				b.WriteString(" — " + mdCell(msg, 200))
			}
		}
		if t.Error != nil {
			b.WriteString(" — " + mdCell(string(t.Error.Class)+" "+t.Error.Message, 200))
		}
		b.WriteString("\n")
	}
	if link := flowLink(cfg, f.ID); link != "" {
		fmt.Fprintf(&b, "\n[The flow in the console](%s)\n", link)
	}
	return b.String()
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// changedFiles lists, briefly, what an attempt changed.
func changedFiles(a *projection.Attempt) string {
	r := a.Report
	files := append(append(append([]string{}, r.FilesCreated...), r.FilesModified...), r.FilesDeleted...)
	if len(files) == 0 {
		return ""
	}
	const show = 5
	var names []string
	for i, f := range files {
		if i == show {
			names = append(names, fmt.Sprintf("%d more", len(files)-show))
			break
		}
		names = append(names, "`"+mdCell(f, 120)+"`")
	}
	return strings.Join(names, ", ")
}

// publishable reports whether an ended flow that has no pull request yet
// is published, as its on: says.
func publishable(f *projection.Flow) bool {
	switch f.State {
	case drovertype.FlowSucceeded:
		return true
	case drovertype.FlowFailed:
		in := f.Integration
		return f.Publish.PullRequest.On == flow.PublishOnPartial && f.Cancel == nil &&
			in != nil && in.N == f.Round+1 && in.State == drovertype.IntegrationSucceeded
	}
	return false
}
