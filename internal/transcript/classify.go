package transcript

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
)

// origin says where a signal came from; rules name the origins they read.
type origin uint8

const (
	fromJSON origin = 1 << iota // an error in the CLI's structured output
	fromText                    // a plain text line: stderr, or stdout that is not JSON
	fromExit                    // nothing but the exit code
)

// statusServer in rule.status matches any 5xx status.
const statusServer = -5

// rule is one row of a CLI's classification table. Every condition that is
// set must hold; the first row that matches decides. Text lines (fromText)
// only ever match rows with a text pattern, so a catch-all row does not turn
// every stderr line into a failure.
type rule struct {
	in      origin         // the origins the row reads
	status  int            // the signal's HTTP status must be this (statusServer: 5xx); 0: any
	code    string         // the CLI's own error code must be this; "": any
	text    *regexp.Regexp // the CLI's words must match; nil: any
	exit    int            // fromExit rows: the exit code must be this
	implies int            // the status to report when the signal carries none
	class   drovertype.ErrorClass
	retry   bool
	// hint marks a text line that reports a retry rather than the end of the
	// run: it is kept, and used only when the run failed and nothing more
	// definite says why.
	hint bool
}

// signal is one error the output shows, before classification.
type signal struct {
	from       origin
	status     int
	code       string
	text       string
	exit       int
	retryable  *bool         // the CLI's own verdict, when it gives one (opencode isRetryable)
	retryAfter time.Duration // how long to wait, when the output says
	resetAt    time.Time
	rule       *rule // the row that matched, found when the signal was recorded
}

// re compiles a table pattern; tables are package variables, so a bad
// pattern fails at init, in every test.
func re(s string) *regexp.Regexp { return regexp.MustCompile(s) }

// matches reports whether r matches sig, ignoring r.in.
func (r *rule) matches(sig *signal) bool {
	switch {
	case r.exit != 0 && r.exit != sig.exit:
		return false
	case r.status == statusServer && (sig.status < 500 || sig.status > 599):
		return false
	case r.status > 0 && r.status != sig.status:
		return false
	case r.code != "" && r.code != sig.code:
		return false
	case r.text != nil && !r.text.MatchString(sig.text):
		return false
	}
	return true
}

// lookup returns the first row of rules that matches sig, or nil.
func lookup(rules []rule, sig *signal) *rule {
	for i := range rules {
		r := &rules[i]
		if r.in&sig.from == 0 || (sig.from == fromText && r.text == nil) {
			continue
		}
		if r.matches(sig) {
			return r
		}
	}
	return nil
}

// classify turns sig into a Failure with its row (looked up in rules if it
// has none yet); with no row it is a RUNTIME_ERROR that is not retryable.
func classify(rules []rule, sig *signal) *Failure {
	r := sig.rule
	if r == nil {
		r = lookup(rules, sig)
	}
	if r == nil {
		r = &rule{class: drovertype.ClassRuntimeError}
	}
	f := &Failure{
		Class:     r.class,
		Status:    sig.status,
		Message:   clip(strings.TrimSpace(sig.text), MaxMessage),
		Retryable: r.retry,
	}
	if f.Message == "" {
		f.Message = "the output gives no message"
	}
	if f.Status == 0 {
		f.Status = r.implies
	}
	if sig.retryable != nil {
		f.Retryable = *sig.retryable
	}
	if f.Retryable {
		f.RetryAfter = sig.retryAfter
	}
	f.ResetAt = sig.resetAt
	return f
}

// statusPatterns find an HTTP status in a CLI's words when no field carries
// it. Only 4xx and 5xx count.
var statusPatterns = []*regexp.Regexp{
	// codex/fail-401: "unexpected status 401 Unauthorized: Incorrect API key provided"
	re(`\bunexpected status (\d{3})\b`),
	// codex/fail-429: "exceeded retry limit, last status: 429 Too Many Requests"
	re(`\blast status: (\d{3})\b`),
	// gemini/fail-401: result error.message "[API Error: {"error":{"code":401,...}}]"
	re(`"code":\s*(\d{3})\b`),
	// pi/fail-401, pi/fail-429: errorMessage "401 Incorrect API key provided", finalError "429 Rate limit reached"
	re(`^(\d{3}) `),
	// copilot/fail-401: session.error "Authentication failed with provider at <URL> (HTTP 401)."
	re(`\(HTTP (\d{3})\)`),
	// copilot/fail-429: session.error "... Last error: 429 Rate limit reached ..."
	re(`\bLast error: (\d{3}) `),
	// claude/fail-429: "API Error: Request rejected (429) · ..."; docs/runtimes.md#claude: "API Error: 500 ..."/"529 ..."
	re(`\bRequest rejected \((\d{3})\)`),
	re(`\bAPI Error: (\d{3})\b`),
	// gemini/fail-429/stderr.txt: "Attempt 1 failed with status 429. Retrying with backoff..."
	re(`\bfailed with status (\d{3})\b`),
	// docs/runtimes.md#quota-messages: pi with Google's Code Assist, errorMessage
	// "Cloud Code Assist API error (429): You have exhausted your capacity on this model. …"
	re(`\bAPI error \((\d{3})\)`),
}

// statusFromText returns the first HTTP error status the words give, or 0.
func statusFromText(s string) int {
	for _, p := range statusPatterns {
		if m := p.FindStringSubmatch(s); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n >= 400 && n <= 599 {
				return n
			}
		}
	}
	return 0
}

// tryAgainIn is the one wait the recorded messages state in words:
// pi/fail-429, opencode/fail-429, copilot/fail-429 all carry the server's
// "Please try again in 1s." (OpenAI's wording: also "20ms", "1.5s", "6m0s").
var tryAgainIn = re(`(?i)\btry again in ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)`)

// retryAfterText returns the wait the words state, or 0.
func retryAfterText(s string) time.Duration {
	m := tryAgainIn.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	d, err := time.ParseDuration(m[1])
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// httpDate is the IMF-fixdate form of an HTTP date (RFC 9110 §5.6.7).
const httpDate = "Mon, 02 Jan 2006 15:04:05 GMT"

// retryAfterHeader reads a Retry-After header value (RFC 9110 §10.2.3):
// delay seconds, or an HTTP date, which is when to try again.
func retryAfterHeader(v string) (time.Duration, time.Time) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, time.Time{}
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > 1<<31 {
			return 0, time.Time{}
		}
		return time.Duration(n) * time.Second, time.Time{}
	}
	if t, err := time.Parse(httpDate, v); err == nil {
		return 0, t
	}
	return 0, time.Time{}
}

// millis converts a fractional millisecond count, rounded to the millisecond.
func millis(ms float64) time.Duration {
	if !(ms > 0) || ms > float64(24*time.Hour/time.Millisecond) {
		return 0
	}
	return time.Duration(ms+0.5) * time.Millisecond
}
