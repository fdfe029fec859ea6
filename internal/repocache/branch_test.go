package repocache

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/drover-dev/drover/internal/git"
)

// The Go check must never accept a name git refuses or would expand; the
// names it leaves to git are marked.
func TestPlainBranchAgreesWithGit(t *testing.T) {
	t.Parallel()
	c := newTestCache(t)
	tests := []struct {
		name  string
		plain bool // accepted without asking git
	}{
		{"main", true},
		{"drover/one-cs4iig/a/1", true},
		{"drover/flow_1/task-a/12", true},
		{"foo/bar_baz-1.2", true},
		{"a.b/c.d", true},
		{"UPPER/lower/09", true},
		{"a/HEAD", true},
		{"refs/heads/x", true},
		{"lock.x", true},
		{"a/b.locks", true},
		{"a-/b_", true},
		{"HEAD", false},
		{"a/-b", false}, // git accepts it; left to git
		{"naïve", false},
		{"a@b", false},
		{"@", false},
		{"@{-1}", false},
		{"a@{1}", false},
		{"-a", false},
		{".a", false},
		{"a/.b", false},
		{"a..b", false},
		{"a.lock", false},
		{"a/b.lock", false},
		{"x.lock/y", false},
		{"a/", false},
		{"/a", false},
		{"a.", false},
		{"a/b.", false},
		{"a//b", false},
		{"a b", false},
		{"a~1", false},
		{"a^", false},
		{"a:b", false},
		{"q?", false},
		{"a*", false},
		{"a[b", false},
		{"back\\slash", false},
		{"tab\there", false},
		{"", false},
	}
	ctx := context.Background()
	for _, tt := range tests {
		plain := git.PlainBranch(tt.name)
		if plain != tt.plain {
			t.Errorf("plainBranch(%q) = %v, want %v", tt.name, plain, tt.plain)
		}
		if tt.name == "" {
			continue // git's usage error, not a verdict
		}
		gitErr := c.checkBranchGit(ctx, tt.name)
		if plain && gitErr != nil {
			t.Errorf("plainBranch accepts %q, git refuses: %v", tt.name, gitErr)
		}
		if !plain && gitErr == nil && !slices.Contains([]string{"a/-b", "naïve", "a@b", "@"}, tt.name) {
			t.Errorf("git accepts %q; mark it or make plainBranch accept it", tt.name)
		}
	}
}

func TestCheckBranchRunsGitOnlyForUnusualNames(t *testing.T) {
	t.Parallel()
	c, rec := newRecordingCache(t)
	ctx := context.Background()
	if err := c.checkBranch(ctx, "drover/flow-1/task-a/1"); err != nil {
		t.Fatalf("plain name: %v", err)
	}
	if got := rec.Verbs(); len(got) != 0 {
		t.Errorf("plain name ran git: %q", got)
	}
	if err := c.checkBranch(ctx, "a/-b"); err != nil {
		t.Errorf("a/-b: %v", err)
	}
	if err := c.checkBranch(ctx, "@{-1}"); !errors.Is(err, ErrInvalidBranch) {
		t.Errorf("@{-1}: err = %v, want ErrInvalidBranch", err)
	}
	if got, want := rec.Verbs(), []string{"check-ref-format", "check-ref-format"}; !slices.Equal(got, want) {
		t.Errorf("unusual names ran %q, want %q", got, want)
	}
}
