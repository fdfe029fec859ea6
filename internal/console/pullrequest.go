package console

import (
	"fmt"
	"strings"

	"github.com/drover-dev/drover/internal/eventlog/projection"
)

// prCell is a flow's pull request as the flow page shows it: its number
// and state, its head's checks and its latest review round; the forge's
// URL is in the title (links go only under /ui/).
func prCell(f *projection.Flow) cell {
	if f.Publish == nil || f.Publish.PullRequest == nil {
		return cell{Text: "—"}
	}
	pr := f.PR
	switch {
	case pr == nil:
		return cell{Text: "when the flow ends, on " + f.Publish.PullRequest.Forge}
	case pr.Number == 0 && pr.Error != nil:
		return cell{Text: "not published: " + string(pr.Error.Class), Class: "st-failed", Title: pr.Error.Message}
	case pr.Number == 0:
		return cell{Text: "publishing"}
	}
	parts := []string{fmt.Sprintf("#%d %s", pr.Number, pr.State)}
	if c := pr.Checks; c != nil {
		parts = append(parts, fmt.Sprintf("checks %d passed, %d failed, %d pending", c.Passed, c.Failed, c.Pending))
	}
	if r := pr.Round(); r != nil {
		parts = append(parts, fmt.Sprintf("round %d %s", r.N, r.State))
	}
	if n := len(pr.Feedback); n > 0 {
		parts = append(parts, fmt.Sprintf("%d feedback waiting", n))
	}
	c := cell{Text: strings.Join(parts, " · "), Title: pr.URL, Class: "st-" + pr.State}
	if pr.Pending != nil {
		c.Text += " · updating"
	}
	return c
}
