package flow

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// Publish says what becomes of a flow once it has ended: a pull request
// (GitLab: a merge request) from its integration branch, and whether the
// reviews and checks of that pull request send the agent back for another
// round (docs/forges.md). A flow's fields override its project's one by
// one; the controller fills in what is inferred and defaulted when it
// accepts the flow.
type Publish struct {
	PullRequest *PullRequestSpec `yaml:"pull_request" json:"pull_request,omitempty"`
	Iterate     *IterateSpec     `yaml:"iterate" json:"iterate,omitempty"`
}

// PullRequestSpec is how a flow is published.
type PullRequestSpec struct {
	// Forge names an entry of the controller's forges; empty: the one
	// whose host serves the flow's repo URL.
	Forge string `yaml:"forge" json:"forge,omitempty"`
	// Repo is the repository at the forge (owner/name; GitLab:
	// namespace/name); empty: read from the flow's repo URL.
	Repo string `yaml:"repo" json:"repo,omitempty"`
	// Base is the branch the pull request merges into; empty: the flow's
	// base when it names a branch, else the repository's default branch.
	Base string `yaml:"base" json:"base,omitempty"`
	// Title is the pull request's title; empty: the flow's name.
	Title string `yaml:"title" json:"title,omitempty"`
	// Draft opens it as a draft. Defaults to false.
	Draft *bool `yaml:"draft" json:"draft,omitempty"`
	// On is when it is published: PublishOnSuccess (the default), or
	// PublishOnPartial to publish what succeeded of a flow that failed in
	// part.
	On string `yaml:"on" json:"on,omitempty"`
	// Labels, Reviewers and Assignees are set when it is opened.
	Labels    []string `yaml:"labels" json:"labels,omitempty"`
	Reviewers []string `yaml:"reviewers" json:"reviewers,omitempty"`
	Assignees []string `yaml:"assignees" json:"assignees,omitempty"`
}

// When a flow is published.
const (
	PublishOnSuccess = "success" // every task succeeded
	PublishOnPartial = "partial" // at least one did, and the integration branch was built
)

// IterateSpec is what sends the agent back to the pull request.
type IterateSpec struct {
	// On lists what starts a round: IterateChangesRequested (a review
	// that requests changes) and IterateChecksFailed (a check of the
	// head commit that failed). Defaults to both.
	On []string `yaml:"on" json:"on,omitempty"`
	// MaxRounds bounds the rounds the feedback starts. Defaults to 2.
	MaxRounds int `yaml:"max_rounds" json:"max_rounds,omitempty"`
	// PollInterval is how often the pull request is read when nothing
	// changes, before backing off. Defaults to 30s.
	PollInterval Duration `yaml:"poll_interval" json:"poll_interval,omitempty"`
	// Split is SplitRound (one task per round, the default) or SplitFile
	// (one task per file the review comments name, and one for the rest).
	Split string `yaml:"split" json:"split,omitempty"`
	// Checks names the checks that count; empty: every check.
	Checks []string `yaml:"checks" json:"checks,omitempty"`
	// Prompt comes first in a round's prompt, before the feedback.
	Prompt string `yaml:"prompt" json:"prompt,omitempty"`
}

// What starts a round.
const (
	IterateChangesRequested = "changes_requested"
	IterateChecksFailed     = "checks_failed"
)

// How a round's work is split into tasks.
const (
	SplitRound = "round"
	SplitFile  = "file"
)

// Defaults of IterateSpec.
const (
	DefaultMaxRounds    = 2
	DefaultPollInterval = Duration(30 * time.Second)
)

// Limits of a publish section.
const (
	MaxRounds        = 20
	maxNames         = 20 // labels, reviewers or assignees
	maxName          = 100
	maxTitle         = 256
	maxChecks        = 50
	maxIteratePrompt = 16 << 10
	minPollInterval  = Duration(5 * time.Second)
	maxPollInterval  = Duration(time.Hour)
)

var (
	publishFields     = []string{"pull_request", "iterate"}
	pullRequestFields = []string{"forge", "repo", "base", "title", "draft", "on", "labels", "reviewers", "assignees"}
	iterateFields     = []string{"on", "max_rounds", "poll_interval", "split", "checks", "prompt"}
)

// publish decodes a publish section; null reads as unset.
func (d decoder) publish(n *yaml.Node, field string) *Publish {
	if !d.mapping(n, field, "a mapping like {pull_request: {forge: NAME}, iterate: {max_rounds: 2}}") {
		return nil
	}
	pub := &Publish{}
	d.fields(n, field, publishFields, func(key, f string, v *yaml.Node) {
		switch key {
		case "pull_request":
			if d.mapping(v, f, "a mapping like {forge: NAME, repo: OWNER/NAME}") {
				pub.PullRequest = &PullRequestSpec{}
				d.pullRequest(v, f, pub.PullRequest)
			}
		case "iterate":
			if d.mapping(v, f, "a mapping like {on: [changes_requested, checks_failed], max_rounds: 2}") {
				pub.Iterate = &IterateSpec{}
				d.iterate(v, f, pub.Iterate)
			}
		}
	})
	return pub
}

func (d decoder) pullRequest(n *yaml.Node, field string, pr *PullRequestSpec) {
	d.fields(n, field, pullRequestFields, func(key, f string, v *yaml.Node) {
		switch key {
		case "forge":
			pr.Forge, _ = d.str(v, f)
		case "repo":
			pr.Repo, _ = d.str(v, f)
		case "base":
			pr.Base, _ = d.str(v, f)
		case "title":
			pr.Title, _ = d.str(v, f)
		case "draft":
			pr.Draft = d.boolean(v, f)
		case "on":
			pr.On, _ = d.str(v, f)
		case "labels":
			pr.Labels = d.strs(v, f, "a list of labels", maxNames)
		case "reviewers":
			pr.Reviewers = d.strs(v, f, "a list of user names", maxNames)
		case "assignees":
			pr.Assignees = d.strs(v, f, "a list of user names", maxNames)
		}
	})
}

func (d decoder) iterate(n *yaml.Node, field string, it *IterateSpec) {
	d.fields(n, field, iterateFields, func(key, f string, v *yaml.Node) {
		switch key {
		case "on":
			it.On = d.strs(v, f, "a list like [changes_requested, checks_failed]", 2)
		case "max_rounds":
			if m := d.integer(v, f); m != nil {
				it.MaxRounds = *m
			}
		case "poll_interval":
			it.PollInterval = d.duration(v, f)
		case "split":
			it.Split, _ = d.str(v, f)
		case "checks":
			it.Checks = d.strs(v, f, "a list of check names", maxChecks)
		case "prompt":
			it.Prompt, _ = d.str(v, f)
		}
	})
}

// DecodePublishJSON decodes and checks a publish section on its own, as a
// project's configuration holds it: the same fields, limits and words as
// a flow's, each problem named from field.
func DecodePublishJSON(data []byte, field string) (*Publish, error) {
	p := &problems{bad: map[string]bool{}}
	n, err := newJSONReader(data).whole("more after the publish section")
	if err != nil {
		p.record(jsonError(err))
		return nil, p.err()
	}
	pub := decoder{p: p, wire: true}.publish(n, field)
	checkPublish(p, field, pub)
	if err := p.err(); err != nil {
		return nil, err
	}
	return pub, nil
}

// repoPathRE is a repository at a forge: owner/name, or GitLab's
// namespace/subgroup/.../name.
var repoPathRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){1,19}$`)

// ValidForgeRepo reports whether repo names a repository at a forge.
func ValidForgeRepo(repo string) error {
	if !repoPathRE.MatchString(repo) || strings.Contains(repo, "..") || len(repo) > 255 {
		return fmt.Errorf("flow: %.100q is not a repository at a forge: write OWNER/NAME (GitLab: NAMESPACE/NAME)", repo)
	}
	return nil
}

// checkPublish checks what a publish section says on its own; what needs
// the controller (the forge exists, a repo can be inferred) is checked
// when the flow is accepted.
func checkPublish(p *problems, field string, pub *Publish) {
	if pub == nil {
		return
	}
	if pr := pub.PullRequest; pr != nil {
		f := field + ".pull_request"
		if pr.Forge != "" {
			if msg := idProblem(pr.Forge); msg != "" {
				p.add(f+".forge", "%s", msg)
			}
		}
		if pr.Repo != "" {
			if err := ValidForgeRepo(pr.Repo); err != nil {
				p.add(f+".repo", "%s", strings.TrimPrefix(err.Error(), "flow: "))
			}
		}
		if msg := baseProblem(pr.Base); msg != "" {
			p.add(f+".base", "%s", msg)
		}
		if msg := lineProblem(pr.Title, maxTitle); msg != "" {
			p.add(f+".title", "%s", msg)
		}
		if pr.On != "" && pr.On != PublishOnSuccess && pr.On != PublishOnPartial {
			p.add(f+".on", "%q: want %s or %s", pr.On, PublishOnSuccess, PublishOnPartial)
		}
		for k, names := range map[string][]string{"labels": pr.Labels, "reviewers": pr.Reviewers, "assignees": pr.Assignees} {
			for i, n := range names {
				if msg := lineProblem(n, maxName); msg != "" || n == "" {
					p.add(fmt.Sprintf("%s.%s[%d]", f, k, i), "%s", cmpOr(msg, "empty: name one"))
				}
			}
		}
	}
	if it := pub.Iterate; it != nil {
		checkIterate(p, field+".iterate", it)
	}
}

func checkIterate(p *problems, f string, it *IterateSpec) {
	for i, o := range it.On {
		switch {
		case o != IterateChangesRequested && o != IterateChecksFailed:
			p.add(fmt.Sprintf("%s.on[%d]", f, i), "%q: want %s or %s", o, IterateChangesRequested, IterateChecksFailed)
		case slices.Index(it.On, o) != i:
			p.add(fmt.Sprintf("%s.on[%d]", f, i), "%s is listed twice", o)
		}
	}
	if it.MaxRounds < 0 || it.MaxRounds > MaxRounds {
		p.add(f+".max_rounds", "%d is out of range: want 0 to %d (0 means %d)", it.MaxRounds, MaxRounds, DefaultMaxRounds)
	}
	if it.PollInterval != 0 && (it.PollInterval < minPollInterval || it.PollInterval > maxPollInterval) {
		p.add(f+".poll_interval", "%s is out of range: want %s to %s", it.PollInterval, minPollInterval, maxPollInterval)
	}
	if it.Split != "" && it.Split != SplitRound && it.Split != SplitFile {
		p.add(f+".split", "%q: want %s or %s", it.Split, SplitRound, SplitFile)
	}
	for i, c := range it.Checks {
		if msg := lineProblem(c, maxName*2); msg != "" || c == "" {
			p.add(fmt.Sprintf("%s.checks[%d]", f, i), "%s", cmpOr(msg, "empty: name a check"))
		}
	}
	if len(it.Prompt) > maxIteratePrompt {
		p.add(f+".prompt", "%d bytes; the limit is %d", len(it.Prompt), maxIteratePrompt)
	}
}

// lineProblem says what is wrong with a one-line name or title.
func lineProblem(s string, max int) string {
	switch {
	case len(s) > max:
		return fmt.Sprintf("%.20q... is %d bytes long; the limit is %d", s, len(s), max)
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Sprintf("%.40q holds control characters (a new line, say)", s)
	}
	return ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// MergePublish is a flow's publish section over its project's: each field
// the flow sets wins, the others are the project's. Neither is changed.
func MergePublish(f, project *Publish) *Publish {
	switch {
	case f == nil && project == nil:
		return nil
	case f == nil:
		return project.clone()
	case project == nil:
		return f.clone()
	}
	out := project.clone()
	if pr := f.PullRequest; pr != nil {
		if out.PullRequest == nil {
			out.PullRequest = &PullRequestSpec{}
		}
		o := out.PullRequest
		o.Forge, o.Repo, o.Base, o.Title, o.On = or(pr.Forge, o.Forge), or(pr.Repo, o.Repo), or(pr.Base, o.Base),
			or(pr.Title, o.Title), or(pr.On, o.On)
		if pr.Draft != nil {
			o.Draft = pr.Draft
		}
		o.Labels, o.Reviewers, o.Assignees = orList(pr.Labels, o.Labels), orList(pr.Reviewers, o.Reviewers), orList(pr.Assignees, o.Assignees)
	}
	if it := f.Iterate; it != nil {
		if out.Iterate == nil {
			out.Iterate = &IterateSpec{}
		}
		o := out.Iterate
		o.On, o.Checks = orList(it.On, o.On), orList(it.Checks, o.Checks)
		o.Split, o.Prompt = or(it.Split, o.Split), or(it.Prompt, o.Prompt)
		if it.MaxRounds != 0 {
			o.MaxRounds = it.MaxRounds
		}
		if it.PollInterval != 0 {
			o.PollInterval = it.PollInterval
		}
	}
	return out
}

func or(a, b string) string { return cmpOr(a, b) }

func orList(a, b []string) []string {
	if len(a) > 0 {
		return slices.Clone(a)
	}
	return slices.Clone(b)
}

func (p *Publish) clone() *Publish {
	out := &Publish{}
	if p.PullRequest != nil {
		pr := *p.PullRequest
		pr.Labels, pr.Reviewers, pr.Assignees = slices.Clone(pr.Labels), slices.Clone(pr.Reviewers), slices.Clone(pr.Assignees)
		out.PullRequest = &pr
	}
	if p.Iterate != nil {
		it := *p.Iterate
		it.On, it.Checks = slices.Clone(it.On), slices.Clone(it.Checks)
		out.Iterate = &it
	}
	return out
}

// Iterates reports whether it starts a round on what.
func (it *IterateSpec) Iterates(what string) bool { return it != nil && slices.Contains(it.On, what) }

// Validate checks a publish section as a flow's is checked, its problems
// named from "publish".
func (p *Publish) Validate() error {
	pr := &problems{}
	checkPublish(pr, "publish", p)
	return pr.err()
}
