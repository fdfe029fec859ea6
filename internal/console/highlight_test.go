package console

import (
	"strings"
	"testing"
)

func TestHighlightDiff(t *testing.T) {
	patch := "diff --git a/main.go b/main.go\nindex 1..2 100644\n--- a/main.go\n+++ b/main.go\n" +
		"@@ -1,2 +1,2 @@\n package main // the package\n-var x = \"<b>old</b>\"\n+func f() int { return 42 }\n"
	lines, cut := highlightDiff(patch)
	if cut {
		t.Fatal("cut a small patch")
	}
	classes := []string{}
	for _, l := range lines {
		classes = append(classes, l.Class)
	}
	if got := strings.Join(classes, " "); got != "file meta meta meta hunk ctx del add" {
		t.Fatalf("classes %s", got)
	}
	// The text is kept whole: joining the segments gives the line back.
	for i, want := range strings.Split(strings.TrimSpace(patch), "\n") {
		var b strings.Builder
		for _, s := range lines[i].Segs {
			b.WriteString(s.Text)
		}
		if b.String() != want {
			t.Errorf("line %d: %q, want %q", i, b.String(), want)
		}
	}
	find := func(line int, class string) []string {
		var out []string
		for _, s := range lines[line].Segs {
			if s.Class == class {
				out = append(out, s.Text)
			}
		}
		return out
	}
	if got := find(5, "kw"); len(got) != 1 || got[0] != "package" {
		t.Errorf("keywords of ctx line: %q", got)
	}
	if got := find(5, "com"); len(got) != 1 || got[0] != "// the package" {
		t.Errorf("comment: %q", got)
	}
	if got := find(6, "str"); len(got) != 1 || got[0] != `"<b>old</b>"` {
		t.Errorf("string: %q", got)
	}
	if got := find(7, "num"); len(got) != 1 || got[0] != "42" {
		t.Errorf("number: %q", got)
	}
}

func TestHighlightDiffBounds(t *testing.T) {
	big := "diff --git a/x b/x\n" + strings.Repeat("+line\n", maxDiffLines+10)
	lines, cut := highlightDiff(big)
	if !cut || len(lines) != maxDiffLines {
		t.Fatalf("%d lines, cut %v", len(lines), cut)
	}
	// An unterminated string or comment runs to the end of its line only.
	for _, l := range []*language{langGo, langC, langHash, langSQL, langPlain, nil} {
		for _, s := range []string{`"unterminated`, "/* open", "'\\", "`", "x = 1.2.3e", ""} {
			var b strings.Builder
			for _, sg := range l.tokens(s) {
				b.WriteString(sg.Text)
			}
			if b.String() != s {
				t.Errorf("tokens(%q) lost text: %q", s, b.String())
			}
		}
	}
}

func FuzzHighlight(f *testing.F) {
	f.Add("diff --git a/a.go b/a.go\n+x := \"s\" // c\n")
	f.Fuzz(func(t *testing.T, patch string) {
		lines, _ := highlightDiff(patch)
		for _, l := range lines {
			for _, s := range l.Segs {
				if strings.ContainsAny(s.Text, "\x1b\r") {
					t.Fatalf("control left in %q", s.Text)
				}
			}
		}
	})
}
