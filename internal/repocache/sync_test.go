package repocache

import (
	"context"
	"testing"
	"time"
)

func TestFetchedSince(t *testing.T) {
	t.Parallel()
	asked := time.Now()
	tests := []struct {
		name      string
		fetchedAt time.Time
		want      bool
	}{
		{"never fetched", time.Time{}, false},
		{"started before the ask", asked.Add(-time.Nanosecond), false},
		{"started at the ask", asked, true},
		{"started after the ask", asked.Add(time.Millisecond), true},
	}
	for _, tt := range tests {
		if got := fetchedSince(tt.fetchedAt, asked); got != tt.want {
			t.Errorf("%s: fetchedSince = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A fetch that started after a Prepare asked serves it; one that started
// before does not, even when it finished after.
func TestSyncSharesFetchesStartedSinceAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := newOrigin(t)
	c, rec := newRecordingCache(t)
	resolve(t, c, Request{URL: o.URL, Base: mainBranch, Branch: "drover/sync/1"})
	r := lockedRepo(t, c, o.URL)
	defer r.Unlock()
	rec.Verbs()

	before := time.Now()
	if err := c.sync(ctx, r, before, everything); err != nil {
		t.Fatal(err)
	}
	wantVerbs(t, rec, "sync asked before the clone's fetch", "fetch")
	if err := c.sync(ctx, r, before, everything); err != nil {
		t.Fatal(err)
	}
	wantVerbs(t, rec, "sync asked before the last fetch started")
	if err := c.sync(ctx, r, time.Now(), everything); err != nil {
		t.Fatal(err)
	}
	wantVerbs(t, rec, "sync asked after the last fetch started", "fetch")
}
