package repocache

import (
	"fmt"
	"slices"
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
	flow := make([]Ref, maxMergeRefspecs+1)
	for i := range flow {
		flow[i] = Ref{Branch: fmt.Sprintf("drover/f/t%03d/1", i)}
	}
	if got := strings.Join(wantedRefspecs("main", flow).list(), " "); got != "+refs/heads/drover/f/*:refs/remotes/origin/drover/f/* "+
		"+refs/heads/main*:refs/remotes/origin/main* +refs/tags/main*:refs/tags/main*" {
		t.Errorf("an integration of many results of one flow fetches %s, want the flow's results and the base", got)
	}
	for _, other := range []string{"drover/g/t/1", "drover/ff/t/1", "feature", "drover/f"} {
		two := append(slices.Clone(flow), Ref{Branch: other})
		if !wantedRefspecs("main", two).all {
			t.Errorf("many results and %s: want every branch fetched", other)
		}
	}
	for _, base := range []string{"@{-1}", "a..b", "x:y", "refs/heads/a b"} {
		if !wantedRefspecs(base, nil).all {
			t.Errorf("base %q: not a plain name, want everything fetched as before", base)
		}
	}
}
