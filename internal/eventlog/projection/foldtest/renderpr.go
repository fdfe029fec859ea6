package foldtest

import (
	"fmt"
	"strings"

	"github.com/drover-dev/drover/internal/eventlog/projection"
)

// renderPR prints a flow's publish section and pull request.
func renderPR(b *strings.Builder, f *projection.Flow) {
	if p := f.Publish; p != nil && p.PullRequest != nil {
		pr := p.PullRequest
		fmt.Fprintf(b, "  publish: forge=%s repo=%s base=%q title=%q on=%s", pr.Forge, pr.Repo, pr.Base, pr.Title, pr.On)
		if it := p.Iterate; it != nil {
			fmt.Fprintf(b, " iterate=[%s] max_rounds=%d poll=%s split=%s", strings.Join(it.On, " "), it.MaxRounds, it.PollInterval, it.Split)
		}
		if f.RoundPlan != nil {
			fmt.Fprintf(b, " round_runtime=%s", f.RoundPlan.Worker.Name)
		}
		b.WriteString("\n")
	}
	pr := f.PR
	if pr == nil {
		return
	}
	fmt.Fprintf(b, "  pull request %s/%s #%d: state=%q head=%s base=%q sha=%q requests=%d (round %d)",
		pr.Forge, pr.Repo, pr.Number, pr.State, pr.Head, pr.Base, pr.HeadSHA, pr.Requests, pr.RequestRound)
	if pr.URL != "" {
		fmt.Fprintf(b, " url=%s", pr.URL)
	}
	if q := pr.Pending; q != nil {
		fmt.Fprintf(b, " pending=#%d", q.N)
	}
	if pr.Error != nil {
		fmt.Fprintf(b, " error=%s", renderError(pr.Error))
	}
	if pr.Observed > 0 {
		fmt.Fprintf(b, " observed=%d", pr.Observed)
	}
	if c := pr.Checks; c != nil {
		fmt.Fprintf(b, " checks=%d/%d/%d failing=[%s]", c.Passed, c.Failed, c.Pending, strings.Join(c.Failing, " "))
	}
	if pr.Dropped > 0 {
		fmt.Fprintf(b, " dropped=%d", pr.Dropped)
	}
	if len(pr.Merged) > 0 {
		fmt.Fprintf(b, " merged=[%s]", strings.Join(pr.Merged, " "))
	}
	b.WriteString("\n")
	for _, fb := range pr.Feedback {
		fmt.Fprintf(b, "    feedback %s: %s sha=%q", fb.Key, fb.Kind, fb.HeadSHA)
		if r := fb.Review; r != nil {
			fmt.Fprintf(b, " review=%s by %s comments=%d", r.ID, r.Author, len(r.Comments))
		}
		if c := fb.Check; c != nil {
			fmt.Fprintf(b, " check=%s %s", c.Name, c.Conclusion)
		}
		b.WriteString("\n")
	}
	for _, r := range pr.Rounds {
		fmt.Fprintf(b, "    round %d: %s flow_round=%d tasks=[%s] feedback=[%s] kinds=[%s] started=%s ended=%s",
			r.N, r.State, r.FlowRound, strings.Join(r.Tasks, " "), strings.Join(r.Feedback, " "), strings.Join(r.Kinds, " "),
			ts(r.StartedAt), ts(r.EndedAt))
		if r.Commit != "" {
			fmt.Fprintf(b, " commit=%s", r.Commit)
		}
		b.WriteString("\n")
	}
}
