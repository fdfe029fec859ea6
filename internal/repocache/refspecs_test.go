package repocache

import (
	"strings"
	"testing"
)

func TestWantedRefspecs(t *testing.T) {
	main := wantedRefspecs("main", nil)
	if got := strings.Join(main.list(), " "); got != "+refs/heads/main*:refs/remotes/origin/main* +refs/tags/main*:refs/tags/main*" {
		t.Errorf("base main: %s", got)
	}
	merging := wantedRefspecs("main", []Ref{{Branch: "drover/f/a/1"}})
	head := wantedRefspecs("HEAD", nil)
	for _, tt := range []struct {
		name         string
		fetched, got refspecs
		covers       bool
	}{
		{"same", main, main, true},
		{"more", merging, main, true},
		{"less", main, merging, false},
		{"everything covers all", everything, merging, true},
		{"nothing covers everything", merging, everything, false},
		{"the remote's HEAD only if fetched", main, head, false},
	} {
		if got := tt.fetched.covers(tt.got); got != tt.covers {
			t.Errorf("%s: covers = %v", tt.name, got)
		}
	}
	if !wantedRefspecs("main", make([]Ref, maxMergeRefspecs+1)).all {
		t.Error("an integration of many results fetches one branch at a time")
	}
	for _, base := range []string{"@{-1}", "a..b", "x:y", "refs/heads/a b"} {
		if !wantedRefspecs(base, nil).all {
			t.Errorf("base %q: not a plain name, want everything fetched as before", base)
		}
	}
}
