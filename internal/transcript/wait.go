package transcript

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // zone names in quota messages resolve the same on every host

	"github.com/drover-dev/drover/internal/drovertype"
)

// How long a CLI says to wait, beyond a Retry-After header: the quota and
// usage-limit messages of the CLIs and their providers state a wait ("try
// again in 5 days 22 hours 11 minutes"), a reset time ("resets 3pm
// (America/New_York)") or a Unix time ("usage limit reached|1749924000").
// Each format has a table of the wordings it can print (waitTables); the
// controller's cooldowns and the retry policy act on what they find.

// waitKind says how a wait pattern's first group is read.
type waitKind uint8

const (
	waitFor     waitKind = iota // a duration: "1s", "6m0s", "12h34m16s", "5 days 22 hours 11 minutes"
	waitSeconds                 // whole seconds: "resets_in_seconds":602705
	waitEpoch                   // a Unix time in seconds
	waitClock                   // a time of day, then an IANA zone: "3pm", "America/New_York"
	waitDate                    // a date and time in the CLI's own zone: "Jul 5th, 2026 8:19 PM"
)

// waitRule is one wording of a wait.
type waitRule struct {
	text *regexp.Regexp
	kind waitKind
}

// duration is a wait as words or Go's notation, as the patterns capture it.
const duration = `((?:\d{1,9}(?:\.\d{1,9})?(?:ms|h|m|s))+\b|(?:\d{1,9}(?:\.\d{1,9})?\s?(?:milliseconds?|seconds?|secs?|minutes?|mins?|hours?|hrs?|hr|days?|ms|[smhd])\b(?:,?\s(?:and\s)?)?)+)`

// The wordings, each with where it comes from.
var (
	// pi/fail-429, opencode/fail-429, copilot/fail-429: "Please try again in 1s." (OpenAI's
	// wording: also "20ms", "6m0s"); codex, docs: "Upgrade to Pro (…) or try again in 5 days
	// 22 hours 11 minutes."; copilot, docs: "Please try again in 2 hours." / "in 15 hours 23
	// minutes"; gemini, docs: "Please retry in 47.434392449s." and "Suggested retry after 38s."
	waitTryAgainIn = waitRule{re(`(?i)\b(?:try again|retry) (?:in|after) ` + duration), waitFor}
	// gemini and pi with Google's Code Assist, docs: "Your quota will reset after 12h34m16s."
	waitResetAfter = waitRule{re(`(?i)\b(?:quota|limit) will reset (?:after|in) ` + duration), waitFor}
	// gemini, docs: a google.rpc.RetryInfo detail in the error body, `"retryDelay": "38s"`,
	// or an ErrorInfo with `"quotaResetDelay": "373.801628ms"`.
	waitRetryDelay = waitRule{re(`"(?:retryDelay|quotaResetDelay)"\s*:\s*"((?:\d{1,9}(?:\.\d{1,9})?(?:ms|h|m|s))+)"`), waitFor}
	// codex (ChatGPT sign-in), docs: a 429 body `{"error":{"type":"usage_limit_reached",…,
	// "resets_at":1775317531,"resets_in_seconds":602705}}`.
	waitResetsInSeconds = waitRule{re(`"resets_in_seconds"\s*:\s*(\d{1,10})\b`), waitSeconds}
	waitResetsAtEpoch   = waitRule{re(`"resets_at"\s*:\s*(\d{9,11})\b`), waitEpoch}
	// claude, docs: the result of a run on a subscription past its limit,
	// "Claude AI usage limit reached|1749924000".
	waitUsageLimitEpoch = waitRule{re(`(?i)\busage limit reached\|(\d{9,11})\b`), waitEpoch}
	// claude, docs: "Claude usage limit reached. Your limit will reset at 1pm (Etc/GMT+5).",
	// "You've hit your session limit · resets 12:50am (America/Los_Angeles)".
	waitResetsClock = waitRule{re(`(?i)\bresets?\s(?:at\s)?(\d{1,2}(?::\d{2})?\s?[ap]\.?m\.?)\s?\(([A-Za-z][A-Za-z_]{0,20}(?:/[A-Za-z0-9_+-]{1,30}){0,2})\)`), waitClock}
	// codex, docs: "You've hit your usage limit. Upgrade to Plus to continue using Codex (…),
	// or try again at Jul 5th, 2026 8:19 PM." — in the zone of the host it ran on.
	waitTryAgainAt = waitRule{re(`(?i)\btry again at ([A-Z][a-z]{2,8}\.? \d{1,2}(?:st|nd|rd|th)?,? \d{4},? \d{1,2}:\d{2}\s?[AP]M)\b`), waitDate}
)

// anyProvider is every wording: for CLIs that front any provider (opencode,
// kilo, pi) and for plain text.
var anyProvider = []waitRule{waitUsageLimitEpoch, waitResetsClock, waitTryAgainAt, waitResetsAtEpoch,
	waitResetsInSeconds, waitRetryDelay, waitResetAfter, waitTryAgainIn}

// waitTables lists the wordings each format's errors may carry, absolute
// times first: a reset time says more than a wait.
var waitTables = map[drovertype.OutputFormat][]waitRule{
	drovertype.FormatClaudeStreamJSON: {waitUsageLimitEpoch, waitResetsClock, waitTryAgainIn},
	drovertype.FormatCodexJSON:        {waitTryAgainAt, waitResetsAtEpoch, waitResetsInSeconds, waitTryAgainIn},
	drovertype.FormatGeminiStreamJSON: {waitRetryDelay, waitResetAfter, waitTryAgainIn},
	drovertype.FormatCopilotJSON:      {waitTryAgainIn},
	drovertype.FormatOpenCodeJSON:     anyProvider,
	drovertype.FormatPiJSON:           anyProvider,
	drovertype.FormatText:             anyProvider,
}

// Options are what a Parser may be given beyond the format.
type Options struct {
	// Now is the clock a time of day in the output is read against ("resets
	// 3pm": the next 3pm). Defaults to time.Now.
	Now func() time.Time
	// Location is the zone the CLI prints local times in, the host's: it
	// runs there. Defaults to time.Local.
	Location *time.Location
}

// NewParserWith returns a Parser for f with o; an unknown f is read as Text.
func NewParserWith(f drovertype.OutputFormat, o Options) Parser {
	p := newParser(specFor(f))
	p.now, p.loc = o.Now, o.Location
	return p
}

// clock is the parser's time and zone.
func (p *parser) clock() (time.Time, *time.Location) {
	now, loc := time.Now, time.Local
	if p.now != nil {
		now = p.now
	}
	if p.loc != nil {
		loc = p.loc
	}
	return now(), loc
}

// maxWait bounds any wait read from the output: longer ones are nonsense
// (or a hostile CLI), and a cooldown is capped well below it anyway.
const maxWait = 400 * 24 * time.Hour

// waitIn reads the wait a signal's words state, with the parser's clock for
// times of day. It fills what the signal lacks and leaves the rest.
func (p *parser) waitIn(sig *signal) {
	rules := waitTables[p.spec.format]
	for _, r := range rules {
		if sig.retryAfter > 0 && !sig.resetAt.IsZero() {
			return
		}
		m := r.text.FindStringSubmatch(sig.text)
		if m == nil {
			continue
		}
		now, loc := p.clock()
		d, at := r.read(m, now, loc)
		if d > 0 && sig.retryAfter == 0 {
			sig.retryAfter = d
		}
		if !at.IsZero() && sig.resetAt.IsZero() {
			sig.resetAt = at
		}
	}
}

// read turns a match into a wait or a time; zero for what does not parse.
func (r waitRule) read(m []string, now time.Time, loc *time.Location) (time.Duration, time.Time) {
	switch r.kind {
	case waitFor:
		return parseWait(m[1]), time.Time{}
	case waitSeconds:
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || n <= 0 || time.Duration(n)*time.Second > maxWait {
			return 0, time.Time{}
		}
		return time.Duration(n) * time.Second, time.Time{}
	case waitEpoch:
		return 0, epoch(m[1])
	case waitClock:
		return 0, nextClock(m[1], m[2], now)
	case waitDate:
		return 0, localDate(m[1], loc)
	}
	return 0, time.Time{}
}

// waitUnits are the units parseWait knows, by every spelling it accepts.
var waitUnits = map[string]time.Duration{
	"ms": time.Millisecond, "millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// waitPart is one number and its unit in a wait.
var waitPart = regexp.MustCompile(`(\d+(?:\.\d+)?)\s?([a-zA-Z]+)`)

// parseWait reads "1s", "6m0s", "47.434392449s", "2 hours", "5 days 22
// hours 11 minutes" or "1 day, 3 hours and 5 minutes", rounded up to the
// millisecond; 0 for anything else, or above maxWait.
func parseWait(s string) time.Duration {
	var total float64
	parts := waitPart.FindAllStringSubmatch(s, 8)
	if len(parts) == 0 {
		return 0
	}
	for _, part := range parts {
		n, err := strconv.ParseFloat(part[1], 64)
		unit, ok := waitUnits[strings.ToLower(part[2])]
		if err != nil || !ok {
			return 0
		}
		total += n * float64(unit)
	}
	if !(total > 0) || total > float64(maxWait) {
		return 0
	}
	return time.Duration(math.Ceil(total/float64(time.Millisecond))) * time.Millisecond
}

// The reset times read as such: Unix seconds of ten digits, 2001 to 2286.
const minResetUnix, maxResetUnix = 1_000_000_000, 9_999_999_999

// epoch reads Unix seconds between 2001 and 2286; zero otherwise.
func epoch(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < minResetUnix || n > maxResetUnix {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

// clockLayouts are the times of day the CLIs print, after cleaning.
var clockLayouts = []string{"3pm", "3:04pm"}

// nextClock is the first time at or after now, less a minute, when the
// clock in zone reads the time of day given ("3pm", "12:50am", "9:30 AM"):
// the CLIs name the next reset. Zero when the time or the zone is unknown.
func nextClock(clock, zone string, now time.Time) time.Time {
	loc := location(zone)
	if loc == nil {
		return time.Time{}
	}
	c := strings.ToLower(strings.NewReplacer(" ", "", ".", "").Replace(clock))
	var t time.Time
	var err error
	for _, layout := range clockLayouts {
		if t, err = time.Parse(layout, c); err == nil {
			break
		}
	}
	if err != nil {
		return time.Time{}
	}
	local := now.In(loc)
	at := time.Date(local.Year(), local.Month(), local.Day(), t.Hour(), t.Minute(), 0, 0, loc)
	if at.Before(now.Add(-time.Minute)) {
		at = at.AddDate(0, 0, 1)
	}
	return at.UTC()
}

// ordinal matches the suffix of a day of the month.
var ordinal = regexp.MustCompile(`(\d)(?:st|nd|rd|th)\b`)

// localDate reads "Jul 5th, 2026 8:19 PM" in loc; zero if it does not parse.
func localDate(s string, loc *time.Location) time.Time {
	s = ordinal.ReplaceAllString(s, "$1")
	s = strings.NewReplacer(",", "", ".", "").Replace(s)
	for _, layout := range []string{"Jan 2 2006 3:04 PM", "Jan 2 2006 3:04PM", "January 2 2006 3:04 PM", "January 2 2006 3:04PM"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			if u := t.Unix(); u < minResetUnix || u > maxResetUnix {
				return time.Time{} // "Jul 1 0000": no reset a CLI means
			}
			return t.UTC()
		}
	}
	return time.Time{}
}

// zones caches the zones quota messages named; at most maxZones, so that
// output naming endless zones costs a lookup each, not memory.
var zones struct {
	sync.Mutex
	m map[string]*time.Location
}

const maxZones = 64

// location returns the IANA zone name, nil when it is not one.
func location(name string) *time.Location {
	zones.Lock()
	defer zones.Unlock()
	if loc, ok := zones.m[name]; ok {
		return loc
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "" || name == "Local" {
		loc = nil
	}
	if zones.m == nil {
		zones.m = map[string]*time.Location{}
	}
	if len(zones.m) < maxZones {
		zones.m[name] = loc
	}
	return loc
}
