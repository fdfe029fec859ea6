package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/forge"
)

// pollWork is an open pull request to read, with what the projection
// holds of it.
type pollWork struct {
	flow, forge, repo string
	number, observed  int
	state, headSHA    string
	checks            *event.CheckSummary
	// reviews and failedChecks say which feedback the flow follows.
	reviews, failedChecks bool
	interval              time.Duration
}

func pollOf(st *projection.State, f *projection.Flow) pollWork {
	pr, it := f.PR, f.Publish.Iterate
	return pollWork{flow: f.ID, forge: pr.Forge, repo: pr.Repo, number: pr.Number, observed: pr.Observed, state: pr.State,
		headSHA: pr.HeadSHA, checks: pr.Checks, reviews: it.Iterates(flow.IterateChangesRequested),
		failedChecks: it.Iterates(flow.IterateChecksFailed), interval: pollInterval(f)}
}

// poll reads a pull request and records what changed; it backs off while
// nothing does.
func (r *forgeRunner) poll(ctx context.Context, w pollWork) {
	changed, err := r.pollOnce(ctx, w)
	if err != nil {
		r.log.Warn("reading the pull request failed", "flow", w.flow, "number", w.number, "err", err)
	}
	r.polled(w.flow, w.interval, changed)
}

// pollOnce reads the pull request, its head's checks and (when the flow
// iterates on them) its reviews, and records an observation when its
// state, head or checks changed, and each review requesting changes and
// each failed check of the head not recorded before.
func (r *forgeRunner) pollOnce(ctx context.Context, w pollWork) (bool, error) {
	f, err := r.client(w.forge)
	if err != nil {
		return false, err
	}
	pr, err := f.PullRequest(ctx, w.repo, w.number)
	if err != nil {
		return false, err
	}
	var checks []forge.Check
	if pr.State == forge.Open {
		if checks, err = f.Checks(ctx, w.repo, pr); err != nil {
			return false, err
		}
	}
	var evs []*event.Event
	sum := summarize(checks)
	if string(pr.State) != w.state || pr.HeadSHA != w.headSHA || w.checks == nil || !sameSummary(*w.checks, sum) {
		ev, err := event.New(drovertype.EventID(event.PullRequestObserved, fmt.Sprintf("%s:%d", w.flow, w.observed+1)),
			event.PullRequestObserved, r.now(), w.flow, "", "", 0,
			event.PullRequestObservedData{N: w.observed + 1, Number: pr.Number, State: string(pr.State), HeadSHA: pr.HeadSHA, Checks: sum})
		if err != nil {
			return false, err
		}
		evs = append(evs, ev)
	}
	if pr.State == forge.Open {
		fbs, err := r.feedback(ctx, f, w, pr, checks)
		if err != nil {
			return false, err
		}
		evs = append(evs, fbs...)
	}
	changed := false
	for _, ev := range evs {
		if r.seen(ev.ID) {
			continue
		}
		if err := r.emit(ctx, ev); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// seen reports whether the projection has folded an event id.
func (r *forgeRunner) seen(id string) bool {
	var ok bool
	r.read(func(st *projection.State) { _, ok = st.Seen[id] })
	return ok
}

// feedback is the pull_request_feedback of each review requesting changes
// and each failed check of the head, as the flow follows them.
func (r *forgeRunner) feedback(ctx context.Context, f forge.Forge, w pollWork, pr *forge.PullRequest, checks []forge.Check) ([]*event.Event, error) {
	var out []event.PullRequestFeedbackData
	if w.reviews {
		reviews, err := f.Reviews(ctx, w.repo, pr.Number)
		if err != nil {
			return nil, err
		}
		for _, rv := range reviews {
			if rv.State == forge.ChangesRequested {
				out = append(out, event.PullRequestFeedbackData{Kind: event.FeedbackChangesRequested, Key: "review-" + safeKey(rv.ID),
					HeadSHA: pr.HeadSHA, Review: r.reviewFeedback(rv)})
			}
		}
	}
	if w.failedChecks && pr.HeadSHA != "" {
		for _, ch := range checks {
			if ch.Status == forge.CheckFailed {
				out = append(out, event.PullRequestFeedbackData{Kind: event.FeedbackChecksFailed,
					Key: "check-" + short(pr.HeadSHA) + "-" + safeKey(ch.ID), HeadSHA: pr.HeadSHA, Check: r.checkFeedback(ch)})
			}
		}
	}
	evs := make([]*event.Event, 0, len(out))
	for _, d := range out {
		ev, err := event.New(drovertype.EventID(event.PullRequestFeedback, w.flow+":"+d.Key), event.PullRequestFeedback, r.now(),
			w.flow, "", "", 0, d)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// Bounds of what a feedback keeps of what reviewers and checks wrote.
const (
	maxFeedbackText  = 4 << 10
	maxCommentText   = 2 << 10
	maxFeedbackShort = 512
	maxReviewNotes   = 50
)

// text masks secrets in outside text and bounds it.
func (r *forgeRunner) text(s string, max int) string { return cutText(r.red.String(s), max) }

func (r *forgeRunner) reviewFeedback(rv forge.Review) *event.ReviewFeedback {
	out := &event.ReviewFeedback{ID: r.text(rv.ID, maxFeedbackShort), Author: r.text(rv.Author, maxFeedbackShort),
		Body: r.text(rv.Body, maxFeedbackText), URL: r.text(rv.URL, maxFeedbackShort)}
	for i, c := range rv.Comments {
		if i == maxReviewNotes {
			break
		}
		out.Comments = append(out.Comments, event.ReviewComment{Path: r.text(c.Path, maxFeedbackShort), Line: max(c.Line, 0),
			Body: r.text(c.Body, maxCommentText), Author: r.text(c.Author, maxFeedbackShort)})
	}
	return out
}

func (r *forgeRunner) checkFeedback(ch forge.Check) *event.CheckFeedback {
	return &event.CheckFeedback{ID: r.text(ch.ID, maxFeedbackShort), Name: r.text(ch.Name, maxFeedbackShort),
		Conclusion: r.text(ch.Conclusion, maxFeedbackShort), Summary: r.text(ch.Summary, maxCommentText),
		LogTail: r.red.String(forge.Tail(ch.LogTail, maxFeedbackText)), URL: r.text(ch.URL, maxFeedbackShort)}
}

// maxFailing bounds the failed checks an observation names.
const maxFailing = 20

func summarize(checks []forge.Check) event.CheckSummary {
	var s event.CheckSummary
	for _, c := range checks {
		switch c.Status {
		case forge.CheckPassed:
			s.Passed++
		case forge.CheckFailed:
			s.Failed++
			if len(s.Failing) < maxFailing {
				s.Failing = append(s.Failing, cutText(c.Name, 200))
			}
		default:
			s.Pending++
		}
	}
	slices.Sort(s.Failing)
	return s
}

func sameSummary(a, b event.CheckSummary) bool {
	return a.Passed == b.Passed && a.Failed == b.Failed && a.Pending == b.Pending && slices.Equal(a.Failing, b.Failing)
}

var plainKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// safeKey is a forge's id as part of a feedback key: as it is when it is
// plain, else a digest of it.
func safeKey(id string) string {
	if plainKeyRE.MatchString(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h" + hex.EncodeToString(sum[:8])
}

func short(sha string) string {
	if len(sha) > 12 {
		sha = sha[:12]
	}
	return safeKey(sha)
}
