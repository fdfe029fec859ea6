package drovertype

import (
	"errors"
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	good := []string{"a", "A", "0", "build-v2", "9-lives", "a-", strings.Repeat("x", MaxIDLen)}
	for _, id := range good {
		if err := ValidID(id); err != nil {
			t.Errorf("ValidID(%q) = %v", id, err)
		}
	}
	bad := map[string]string{
		"":                              "id is empty",
		"-a":                            "starts with '-'",
		"a.b":                           "contains '.'",
		"..":                            "contains '.'",
		"a/b":                           "contains '/'",
		`a\b`:                           `contains '\'`,
		"a b":                           "contains a space",
		"a_b":                           "contains '_'",
		"a*":                            "contains '*'",
		"a>":                            "contains '>'",
		"é":                             "contains a non-ASCII character",
		"a\tb":                          "contains control character 0x09",
		"a\x1b[31m":                     "contains control character 0x1b",
		strings.Repeat("x", MaxIDLen+1): "is 64 bytes long",
	}
	for id, want := range bad {
		err := ValidID(id)
		var ie *IDError
		if err == nil || !errors.Is(err, ErrInvalidID) || !errors.As(err, &ie) || !strings.Contains(ie.Problem, want) {
			t.Errorf("ValidID(%q) = %v, want an IDError containing %q", id, err, want)
		}
	}
}

func TestAttemptIDs(t *testing.T) {
	for _, c := range []struct {
		flow, task string
		n          int
		id, branch string
	}{
		{"f", "t", 1, "f_t_1", "drover/f/t/1"},
		{"flow-abc123", "build-v2", 42, "flow-abc123_build-v2_42", "drover/flow-abc123/build-v2/42"},
		{"f", "t", 999_999_999, "f_t_999999999", "drover/f/t/999999999"},
	} {
		if got := AttemptID(c.flow, c.task, c.n); got != c.id {
			t.Errorf("AttemptID = %q, want %q", got, c.id)
		}
		f, task, n, err := ParseAttemptID(c.id)
		if err != nil || f != c.flow || task != c.task || n != c.n {
			t.Errorf("ParseAttemptID(%q) = %q %q %d %v", c.id, f, task, n, err)
		}
		if got := AttemptBranch(c.flow, c.task, c.n); got != c.branch {
			t.Errorf("AttemptBranch = %q, want %q", got, c.branch)
		}
		task, n, ok := ParseAttemptBranch(c.flow, c.branch)
		if !ok || task != c.task || n != c.n {
			t.Errorf("ParseAttemptBranch(%q) = %q %d %v", c.branch, task, n, ok)
		}
	}
	if id := IntegrationID("f", 3); id != "f__integrate_3" {
		t.Errorf("IntegrationID = %q", id)
	}
	if f, task, n, err := ParseAttemptID("f__integrate_3"); err != nil || f != "f" || task != "" || n != 3 {
		t.Errorf("ParseAttemptID of an integration = %q %q %d %v", f, task, n, err)
	}
	if IntegrationBranch("f", 1) != "drover/f/integration" || IntegrationBranch("f", 2) != "drover/f/integration-2" {
		t.Errorf("IntegrationBranch: %q %q", IntegrationBranch("f", 1), IntegrationBranch("f", 2))
	}
	for _, bad := range []string{"", "f", "f_t", "f_t_0", "f_t_01", "f_t_-1", "f_t_+1", "f_t_1e2", "f_t_x", "f_t_1000000000", "_t_1", "f__1",
		"f_t.x_1", "f_t_1_2", "f_t/../x_1", "f___integrate_1", "f_\x1b_1", "f_t_1 "} {
		if _, _, _, err := ParseAttemptID(bad); err == nil || !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseAttemptID(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"drover/f/t", "drover/f/t/0", "drover/f/t/01", "drover/f/t/+1", "drover/g/t/1", "drover/f/t/1/x",
		"drover/f/t.lock/1", "drover/f//1", "drover/f/integration", "refs/heads/drover/f/t/1"} {
		if _, _, ok := ParseAttemptBranch("f", bad); ok {
			t.Errorf("ParseAttemptBranch(%q) accepted", bad)
		}
	}
}

// FuzzAttemptID: whatever ParseAttemptID accepts formats back to itself,
// and its parts are valid ids.
func FuzzAttemptID(f *testing.F) {
	for _, s := range []string{"f_t_1", "f__integrate_2", "a-b_c-d_10", "f_t_01", "f__t_1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flow, task, n, err := ParseAttemptID(s)
		if err != nil {
			return
		}
		again := AttemptID(flow, task, n)
		if task == "" {
			again = IntegrationID(flow, n)
		}
		if again != s || ValidID(flow) != nil || (task != "" && ValidID(task) != nil) || n < 1 {
			t.Fatalf("ParseAttemptID(%q) = %q %q %d, which formats as %q", s, flow, task, n, again)
		}
		if task != "" {
			if bt, bn, ok := ParseAttemptBranch(flow, AttemptBranch(flow, task, n)); !ok || bt != task || bn != n {
				t.Fatalf("branch of %q does not parse back", s)
			}
		}
	})
}

func TestEventIDs(t *testing.T) {
	if got := EventID("attempt_scheduled", "f_t_1"); got != "attempt_scheduled:f_t_1" {
		t.Errorf("EventID = %q", got)
	}
	if got := ClaimEventID("runtime_started", "f_t_1", 2); got != "runtime_started:f_t_1:2" {
		t.Errorf("ClaimEventID = %q", got)
	}
	if got := ClaimEventID("file_modified", "f_t_1", 2, "abc"); got != "file_modified:f_t_1:2:abc" {
		t.Errorf("ClaimEventID with extra = %q", got)
	}
	typ, key, err := ParseEventID("runtime_started:f_t_1:2")
	if err != nil || typ != "runtime_started" || key != "f_t_1:2" {
		t.Errorf("ParseEventID = %q %q %v", typ, key, err)
	}
	for _, bad := range []string{"", "x", ":k", "t:", strings.Repeat("x", MaxEventIDLen) + ":k"} {
		if _, _, err := ParseEventID(bad); err == nil {
			t.Errorf("ParseEventID(%q) accepted", bad)
		}
	}
}

func TestParseOutputFormat(t *testing.T) {
	for in, want := range map[string]OutputFormat{
		"claude-stream-json": FormatClaudeStreamJSON, "claude": FormatClaudeStreamJSON,
		"codex-json": FormatCodexJSON, "opencode-json": FormatOpenCodeJSON, "kilo": FormatOpenCodeJSON,
		"gemini-stream-json": FormatGeminiStreamJSON, "pi-json": FormatPiJSON, " Copilot-JSON ": FormatCopilotJSON,
		"text": FormatText, "": FormatText,
	} {
		if got, err := ParseOutputFormat(in); err != nil || got != want {
			t.Errorf("ParseOutputFormat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseOutputFormat("yaml"); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("ParseOutputFormat(yaml) error = %v", err)
	}
}

func TestErrorClasses(t *testing.T) {
	seen := map[ErrorClass]bool{}
	for _, c := range Classes() {
		if seen[c] || !c.Known() {
			t.Errorf("class %q listed twice or not known", c)
		}
		seen[c] = true
		if got, err := ParseErrorClass(string(c)); err != nil || got != c {
			t.Errorf("ParseErrorClass(%q) = %q %v", c, got, err)
		}
	}
	if len(seen) != 24 {
		t.Errorf("%d classes", len(seen))
	}
	if _, err := ParseErrorClass("MY_CLASS"); err == nil {
		t.Error("an unknown class parsed")
	}
	// Classes returns a copy: the list cannot be changed from outside.
	Classes()[0] = "X"
	if Classes()[0] != ClassCrashed {
		t.Error("Classes shares its slice")
	}
}

func TestAttemptStates(t *testing.T) {
	for s, terminal := range map[AttemptState]bool{
		AttemptScheduled: false, AttemptClaimed: false,
		AttemptSucceeded: true, AttemptFailed: true, AttemptWithdrawn: true,
	} {
		if s.Terminal() != terminal {
			t.Errorf("%s.Terminal() = %v", s, !terminal)
		}
	}
}

func TestParseIntegrationBranch(t *testing.T) {
	for n := 1; n <= 3; n++ {
		if got, ok := ParseIntegrationBranch("f-1", IntegrationBranch("f-1", n)); !ok || got != n {
			t.Errorf("build %d: %d, %v", n, got, ok)
		}
	}
	for _, b := range []string{"drover/f-1/integration-1", "drover/f-1/integration-01", "drover/f-1/integration-", "drover/f-1/integrationx",
		"drover/f-2/integration", "drover/f-1/integration-+2", "drover/f-1/a/1"} {
		if n, ok := ParseIntegrationBranch("f-1", b); ok {
			t.Errorf("%s read as build %d", b, n)
		}
	}
}
