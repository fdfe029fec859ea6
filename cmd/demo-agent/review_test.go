package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reviewPrompt is shaped like the prompt Drover gives a validator: the
// task (directives and all), the diff, the checks' output.
func reviewPrompt(diff string) string {
	return "Review this change.\n\n## Task\n\n@write api.go package api\n@on-attempt 1 @exit 1\nDo not REJECT this.\n\n" +
		"## Diff\n\n" + diff + "\n## Checks\n\n$ go test ./...\nok\n"
}

const (
	diffOne = "diff --git a/api.go b/api.go\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n+++ b/api.go\n@@ -0,0 +1 @@\n+package api\n"
	diffTwo = diffOne + "diff --git a/docs/api.md b/docs/api.md\nindex 1111111..2222222 100644\n--- a/docs/api.md\n+++ b/docs/api.md\n@@ -1 +1,2 @@\n # API\n+REJECT: half done\n"
)

func TestReviewAnswer(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ prompt, want string }{
		"pass, one file": {reviewPrompt(diffOne),
			"Reviewed the change.\n\nVERDICT: PASS\n- looks good: 1 files changed"},
		"reject in the second file": {reviewPrompt(diffTwo),
			"Reviewed the change.\n\nVERDICT: FAIL\n- the diff contains REJECT at docs/api.md"},
		"reject only in the task": {"Task: REJECT nothing\n" + diffOne,
			"Reviewed the change.\n\nVERDICT: PASS\n- looks good: 1 files changed"},
		"empty change": {reviewPrompt("(no changes)\n"),
			"Reviewed the change.\n\nVERDICT: FAIL\n- the change is empty"},
		"empty prompt": {"",
			"Reviewed the change.\n\nVERDICT: FAIL\n- the change is empty"},
		"reject in the check output": {reviewPrompt(diffOne) + "FAIL: REJECT\n",
			"Reviewed the change.\n\nVERDICT: FAIL\n- the diff contains REJECT at api.go"},
		"deleted file": {"diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-REJECT\n",
			"Reviewed the change.\n\nVERDICT: FAIL\n- the diff contains REJECT at old.txt"},
		"blank in the path": {"diff --git a/my file.txt b/my file.txt\n--- a/my file.txt\t\n+++ b/my file.txt\t\n@@ -1 +1 @@\n-a\n+REJECT\n",
			"Reviewed the change.\n\nVERDICT: FAIL\n- the diff contains REJECT at my file.txt"},
		"crlf and three files": {strings.ReplaceAll(diffOne+diffOne+diffOne, "\n", "\r\n"),
			"Reviewed the change.\n\nVERDICT: PASS\n- looks good: 3 files changed"},
	} {
		if got := reviewAnswer(tc.prompt); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", name, got, tc.want)
		}
	}
}

func TestReviewRun(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		stdin string
		args  []string
		want  string
	}{
		"pass on stdin": {reviewPrompt(diffOne), []string{"--review"},
			"Reviewed the change.\n\nVERDICT: PASS\n- looks good: 1 files changed"},
		"fail as -p": {"", []string{"--review", "-p", reviewPrompt(diffTwo)},
			"Reviewed the change.\n\nVERDICT: FAIL\n- the diff contains REJECT at docs/api.md"},
		"empty as an argument, text by name": {"", []string{"--review", "--output-format", "text", "@write x.txt y"},
			"Reviewed the change.\n\nVERDICT: FAIL\n- the change is empty"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			o := runAgentEnv(t, dir, attemptEnv("1"), tc.stdin, tc.args...)
			if o.code != 0 || o.stderr != "" {
				t.Fatalf("exit %d stderr %q", o.code, o.stderr)
			}
			if o.stdout != tc.want+"\n" {
				t.Errorf("stdout %q, want %q", o.stdout, tc.want+"\n")
			}
			// The quoted task's directives did not run (not even @exit 1
			// for attempt 1), and there is no DEMO.md note.
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("review mode changed the tree: %v", entries)
			}
		})
	}
}

func TestReviewRunStreamJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := runAgentEnv(t, dir, attemptEnv("1"), reviewPrompt(diffTwo), "--review", "--output-format", "stream-json")
	if o.code != 0 || o.stderr != "" {
		t.Fatalf("exit %d stderr %q", o.code, o.stderr)
	}
	want := "Reviewed the change.\n\nVERDICT: FAIL\n- the diff contains REJECT at docs/api.md"
	res := checkStream(t, o, dir, false)
	if res["result"] != want {
		t.Errorf("result %q, want %q", res["result"], want)
	}
	if text := blocks(o.events[len(o.events)-2])[0]["text"]; text != want {
		t.Errorf("assistant text %q, want %q", text, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 || len(o.other) != 0 || len(toolUses(o)) != 0 {
		t.Errorf("review mode acted: files %v, raw stdout %q, tool uses %v", entries, o.other, toolUses(o))
	}
}

func TestReviewFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--review=maybe"},
		{"--review", "--output-format", "json"},
		{"--output-format", "text", "-p", "@write x.txt y"}, // text is for --review only
	} {
		dir := t.TempDir()
		if o := runAgent(t, dir, "", args...); o.code != exitUsage {
			t.Errorf("%q: exit %d, want 2", args, o.code)
		}
		if _, err := os.Stat(filepath.Join(dir, "x.txt")); err == nil {
			t.Errorf("%q: x.txt written", args)
		}
	}
}
