package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// attemptEnv is the environment Drover gives attempt n of a task.
func attemptEnv(n string) []string {
	return []string{"DROVER_ATTEMPT_ID=flow-1_build_api_" + n}
}

func TestAttemptNumber(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]int{
		"":                      1, // not under Drover
		"f_t_1":                 1,
		"f_t_2":                 2,
		"flow-1_build_api_12":   12, // underscores in the task id: n is after the last one
		"conformance-attempt-1": 1,  // no underscore
		"a1":                    1,
		"f_t_":                  1,
		"f_t_x":                 1,
		"f_t_0":                 1,
		"f_t_-3":                1,
		"f_t_+3":                1,
		"f_t_2 ":                1,
	} {
		if got := attemptNumber(id); got != want {
			t.Errorf("attemptNumber(%q) = %d, want %d", id, got, want)
		}
	}
}

func TestParseAttemptConditions(t *testing.T) {
	t.Parallel()
	type want struct {
		name, text string
		when       attemptCond
	}
	for prompt, wants := range map[string][]want{
		"@on-attempt 1 @case fail-429":        {{"case", "fail-429", attemptCond{n: 1}}},
		"  @after-attempt 2 @stdout a  b ":    {{"stdout", "a  b ", attemptCond{n: 2, after: true}}},
		"@on-attempt 3\t@exit 4":              {{"exit", "", attemptCond{n: 3}}},
		"@write a.txt x\n@on-attempt 2 @hang": {{"write", "x", attemptCond{}}, {"hang", "", attemptCond{n: 2}}},
		"@before 1700000000 @exit 1":          {{"exit", "", attemptCond{before: 1700000000}}},
		// Quoted feedback is not a directive, conditional or not.
		"> @on-attempt 1 @exit 1\n> @write x.txt y": nil,
	} {
		ds, err := parse(prompt)
		if err != nil {
			t.Errorf("parse(%q): %v", prompt, err)
			continue
		}
		var got []want
		for _, d := range ds {
			got = append(got, want{d.name, d.text, d.when})
		}
		if !slices.Equal(got, wants) {
			t.Errorf("parse(%q) = %+v, want %+v", prompt, got, wants)
		}
	}
	for prompt, wantErr := range map[string]string{
		"@on-attempt":                            "want an attempt number",
		"@on-attempt 0 @exit 1":                  "want an attempt number N >= 1",
		"@after-attempt -1 @exit 1":              "want an attempt number N >= 1",
		"@on-attempt x @exit 1":                  "want an attempt number",
		"@on-attempt 1":                          "want a directive after 1",
		"@on-attempt 1 exit 1":                   `want a directive after 1, such as @case fail-429, got "exit 1"`,
		"@on-attempt 1 @on-attempt 2 @exit 1":    "line 1: @on-attempt: @on-attempt cannot be nested",
		"@after-attempt 1 @on-attempt 2 @hang":   "line 1: @after-attempt: @on-attempt cannot be nested",
		"@on-attempt 1 @after-attempt 2 @hang":   "@after-attempt cannot be nested",
		"x\n@on-attempt 2 @bogus":                "unknown directive @bogus",
		"@on-attempt 2 @write ../x y":            "line 1: @write: ../x: path escapes the working directory",
		"@after-attempt 9 @exit 256":             "want an exit code 0-255",
		"@on-attempt 2 @hang now":                "@hang: takes no arguments",
		"@before tomorrow @exit 1":               "@before: want a time in Unix seconds and a directive",
		"@before 0 @exit 1":                      "want a time in Unix seconds",
		"@before 1700000000":                     "want a directive after 1700000000",
		"@before 1700000000 @on-attempt 1 @hang": "@before: @on-attempt cannot be nested",
		"@on-attempt 1 @before 1700000000 @hang": "@on-attempt: @before cannot be nested",
		"@on-attempt 9999999999 @hang":           "want an attempt number",
	} {
		if _, err := parse(prompt); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("parse(%q) = %v, want an error containing %q", prompt, err, wantErr)
		}
	}
}

func TestForAttempt(t *testing.T) {
	t.Parallel()
	ds, err := parse("@stdout always\n@on-attempt 1 @stdout first\n@on-attempt 2 @stdout second\n@after-attempt 1 @stdout retry\n@after-attempt 2 @stdout late")
	if err != nil {
		t.Fatal(err)
	}
	for attempt, want := range map[int][]string{
		1: {"always", "first"},
		2: {"always", "second", "retry"},
		3: {"always", "retry", "late"},
		9: {"always", "retry", "late"},
	} {
		var got []string
		for _, d := range forAttempt(ds, attempt, time.Now()) {
			got = append(got, d.text)
		}
		if !slices.Equal(got, want) {
			t.Errorf("attempt %d: %q, want %q", attempt, got, want)
		}
	}
}

// TestBefore: @before runs a directive only while the clock is before a
// time, on every attempt: a window of rate limits that every attempt
// meets until it ends, whatever its number.
func TestBefore(t *testing.T) {
	t.Parallel()
	ds, err := parse("@stdout always\n@before 1700000000 @stdout limited\n@on-attempt 2 @stdout second")
	if err != nil {
		t.Fatal(err)
	}
	end := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		attempt int
		now     time.Time
		want    []string
	}{
		{1, end.Add(-time.Second), []string{"always", "limited"}},
		{2, end.Add(-time.Second), []string{"always", "limited", "second"}},
		{1, end, []string{"always"}},
		{2, end.Add(time.Hour), []string{"always", "second"}},
	} {
		var got []string
		for _, d := range forAttempt(ds, tc.attempt, tc.now) {
			got = append(got, d.text)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("attempt %d at %s: %q, want %q", tc.attempt, tc.now, got, tc.want)
		}
	}
}

func TestOnAttemptRun(t *testing.T) {
	t.Parallel()
	const prompt = "Fix it.\n@write always.txt x\n@on-attempt 1 @exit 4\n@after-attempt 1 @write fixed.txt ok\n@on-attempt 2 @stdout second try"
	for name, tc := range map[string]struct {
		env   []string
		code  int
		fixed bool
		raw   []string // @stdout lines
	}{
		"no attempt id": {nil, 4, false, nil}, // attempt 1
		"unparsable id": {[]string{"DROVER_ATTEMPT_ID=whatever"}, 4, false, nil},
		"attempt 1":     {attemptEnv("1"), 4, false, nil},
		"attempt 2":     {attemptEnv("2"), 0, true, []string{"second try"}},
		"attempt 3":     {attemptEnv("3"), 0, true, nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			o := runAgentEnv(t, dir, tc.env, prompt)
			if o.code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", o.code, tc.code, o.stderr)
			}
			checkStream(t, o, dir, tc.code != 0)
			if got := readFile(t, filepath.Join(dir, "always.txt")); got != "x\n" {
				t.Errorf("always.txt = %q", got)
			}
			if _, err := os.Stat(filepath.Join(dir, "fixed.txt")); (err == nil) != tc.fixed {
				t.Errorf("fixed.txt exists: %v, want %v", err == nil, tc.fixed)
			}
			if !slices.Equal(o.other, tc.raw) {
				t.Errorf("raw stdout lines %q, want %q", o.other, tc.raw)
			}
		})
	}
}

func TestOnAttemptNothingApplies(t *testing.T) {
	t.Parallel()
	// Directives for other attempts only: nothing happens, not even the
	// DEMO.md note of a prompt without directives.
	dir := t.TempDir()
	o := runAgentEnv(t, dir, attemptEnv("1"), "@on-attempt 2 @write x.txt x")
	if o.code != 0 {
		t.Fatalf("exit %d stderr %q", o.code, o.stderr)
	}
	checkStream(t, o, dir, false)
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files %v, want none", entries)
	}
}

func TestOnAttemptInvalidFailsEveryAttempt(t *testing.T) {
	t.Parallel()
	for prompt, want := range map[string]string{
		"@write a.txt x\n@on-attempt 2 @bogus":   "unknown directive @bogus",
		"@on-attempt 3 @write /etc/passwd x":     "absolute paths are not allowed",
		"@on-attempt 1 @on-attempt 1 @exit 0":    "cannot be nested",
		"@on-attempt 2 @case fail-429":           "@case works only in persona mode",
		"@after-attempt 1 @write a.txt x\n@on-x": "unknown directive @on-x",
	} {
		for _, n := range []string{"1", "2", "3"} {
			t.Run(n+"/"+prompt, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				o := runAgentEnv(t, dir, attemptEnv(n), prompt)
				if o.code != exitUsage || !strings.Contains(o.stderr, want) {
					t.Fatalf("exit %d stderr %q, want exit 2 and %q", o.code, o.stderr, want)
				}
				checkStream(t, o, dir, true)
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("an invalid prompt executed something: %v", entries)
				}
			})
		}
	}
}

func TestPersonaOnAttempt(t *testing.T) {
	t.Parallel()
	argv := withPrompt(t, readMeta(t, "claude", "success").Argv, recordedPrompt+"\n@on-attempt 1 @case fail-429")
	for name, tc := range map[string]struct {
		env  []string
		want string
	}{
		"no attempt id": {nil, "fail-429"},
		"attempt 1":     {attemptEnv("1"), "fail-429"},
		"attempt 2":     {attemptEnv("2"), "success"}, // the default @case
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkReplay(t, "claude", tc.want, runCLI(t, t.Context(), cliRun{argv: argv, env: tc.env}))
		})
	}

	// @after-attempt, and a @case per attempt.
	codexArgv := withPrompt(t, readMeta(t, "codex", "success").Argv,
		"@on-attempt 1 @case fail-401\n@on-attempt 2 @case fail-429\n@after-attempt 2 @case success")
	for n, want := range map[string]string{"1": "fail-401", "2": "fail-429", "3": "success", "7": "success"} {
		t.Run("codex attempt "+n, func(t *testing.T) {
			t.Parallel()
			checkReplay(t, "codex", want, runCLI(t, t.Context(), cliRun{argv: codexArgv, env: attemptEnv(n)}))
		})
	}
}

func TestPersonaOnAttemptErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		prompt  string
		attempt string
		want    string
	}{
		// A bad recording name fails every attempt, not only its own.
		"unknown case, other attempt": {"@on-attempt 2 @case fail-500", "1", "no recording"},
		"unknown case, its attempt":   {"@on-attempt 2 @case fail-500", "2", "no recording"},
		"nested":                      {"@on-attempt 1 @after-attempt 1 @case success", "3", "cannot be nested"},
		// Two @case lines that apply to the same attempt.
		"two cases": {"@case success\n@on-attempt 2 @case fail-401", "2", "only one @case"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			argv := withPrompt(t, readMeta(t, "pi", "success").Argv, tc.prompt)
			o := runCLI(t, t.Context(), cliRun{argv: argv, env: attemptEnv(tc.attempt)})
			if o.code != exitUsage || !strings.Contains(o.stderr, tc.want) || o.stdout != "" {
				t.Errorf("exit %d stdout %.100q stderr %q, want exit 2 and %q", o.code, o.stdout, o.stderr, tc.want)
			}
			checkHello(t, o.dir, false)
		})
	}
	// ... while the attempt with a single @case is fine.
	argv := withPrompt(t, readMeta(t, "pi", "success").Argv, "@case success\n@on-attempt 2 @case fail-401")
	checkReplay(t, "pi", "success", runCLI(t, t.Context(), cliRun{argv: argv, env: attemptEnv("1")}))
}
