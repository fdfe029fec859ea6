package transcript

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
)

func TestParseWait(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"1s":                               time.Second,
		"6m0s":                             6 * time.Minute,
		"20ms":                             20 * time.Millisecond,
		"47.434392449s":                    47435 * time.Millisecond, // rounded up: a wait never ends early
		"12h34m16s":                        12*time.Hour + 34*time.Minute + 16*time.Second,
		"2 hours":                          2 * time.Hour,
		"58 hours":                         58 * time.Hour,
		"1 hour":                           time.Hour,
		"5 days 22 hours 11 minutes":       5*24*time.Hour + 22*time.Hour + 11*time.Minute,
		"1 day, 3 hours and 5 minutes":     27*time.Hour + 5*time.Minute,
		"4hr 29min":                        4*time.Hour + 29*time.Minute,
		"30 seconds":                       30 * time.Second,
		"1.5h":                             90 * time.Minute,
		"0s":                               0,
		"401 days":                         0, // beyond maxWait
		"3 fortnights":                     0,
		"":                                 0,
		"soon":                             0,
		"999999999 days 999999999 hours":   0,
		"1s 2s 3s 4s 5s 6s 7s 8s 9s 10s":   36 * time.Second, // the first eight parts
		"99999999999999999999999999999999": 0,
	} {
		if got := parseWait(in); got != want {
			t.Errorf("parseWait(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestNextClock(t *testing.T) {
	now := time.Date(2026, 3, 7, 23, 0, 0, 0, time.UTC) // 18:00 in New York, the day before DST starts
	for _, c := range []struct {
		clock, zone string
		want        time.Time
	}{
		{"7pm", "America/New_York", time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)},
		{"6pm", "America/New_York", time.Date(2026, 3, 7, 23, 0, 0, 0, time.UTC)},     // now: the reset is now
		{"5:58pm", "America/New_York", time.Date(2026, 3, 8, 21, 58, 0, 0, time.UTC)}, // passed: tomorrow, after the switch to EDT
		{"9:30 AM", "UTC", time.Date(2026, 3, 8, 9, 30, 0, 0, time.UTC)},
		{"12am", "Europe/Berlin", time.Date(2026, 3, 7, 23, 0, 0, 0, time.UTC)},
		{"12:50a.m.", "America/Los_Angeles", time.Date(2026, 3, 8, 8, 50, 0, 0, time.UTC)},
		{"13pm", "UTC", time.Time{}},
		{"3pm", "Local", time.Time{}}, // the controller's zone is not the CLI's
		{"3pm", "../../etc/passwd", time.Time{}},
	} {
		if got := nextClock(c.clock, c.zone, now); !got.Equal(c.want) {
			t.Errorf("nextClock(%q, %q) = %v, want %v", c.clock, c.zone, got, c.want)
		}
	}
}

// FuzzWait feeds arbitrary words to every format's wait table: it never
// panics, and what it finds is bounded — a wait up to maxWait, a Unix time
// in range, a time of day within a day of the clock.
func FuzzWait(f *testing.F) {
	for _, s := range []string{
		"Please try again in 1s.", "try again in 5 days 22 hours 11 minutes", "Please retry in 47.434392449s.",
		"Claude AI usage limit reached|1749924000", "resets 12:50am (America/Los_Angeles)",
		"Your limit will reset at 1pm (Etc/GMT+5).", "try again at Jul 5th, 2026 8:19 PM.",
		`{"resets_at":1775317531,"resets_in_seconds":602705}`, `"retryDelay":"38s"`,
		"Your quota will reset after 12h34m16s.", "resets 99:99pm (Nowhere/Else)", "try again in 1e9 days",
	} {
		f.Add(s)
	}
	now := time.Date(2026, 7, 4, 18, 30, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, text string) {
		for format := range waitTables {
			p := newParser(specFor(format))
			p.now, p.loc = func() time.Time { return now }, time.UTC
			sig := &signal{text: clip(text, MaxText)}
			p.waitIn(sig)
			if sig.retryAfter < 0 || sig.retryAfter > maxWait {
				t.Fatalf("%s: wait %v", format, sig.retryAfter)
			}
			if at := sig.resetAt; !at.IsZero() && (at.Year() < 2001 || at.Year() > 2287) {
				t.Fatalf("%s: reset at %v", format, at)
			}
		}
		for _, r := range []waitRule{waitResetsClock} {
			if m := r.text.FindStringSubmatch(text); m != nil {
				if _, at := r.read(m, now, time.UTC); !at.IsZero() && (at.Before(now.Add(-time.Minute)) || at.After(now.Add(25*time.Hour+time.Minute))) {
					t.Fatalf("%q: the next %s is %v", text, m[1], at)
				}
			}
		}
		if d := parseWait(text); d < 0 || d > maxWait {
			t.Fatalf("parseWait(%q) = %v", text, d)
		}
	})
}

// Every format has a wait table, so a quota message in any of them is read.
func TestWaitTables(t *testing.T) {
	for f := range specs {
		if len(waitTables[f]) == 0 {
			t.Errorf("format %s has no wait table", f)
		}
	}
	if len(waitTables[drovertype.FormatText]) == 0 {
		t.Error("text has no wait table")
	}
}
