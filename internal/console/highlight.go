package console

import (
	"path"
	"strings"
)

// A patch is shown as lines of coloured segments, built here and escaped
// by the template: no HTML is made from the patch's text.

// diffLine is one line of a patch as shown.
type diffLine struct {
	Class string // meta, file, hunk, add, del, ctx
	Segs  []seg
}

// seg is a run of text with a class (kw, str, com, num, or none).
type seg struct {
	Class, Text string
}

// The most of a patch the attempt page shows; `controller diff` has it all.
const (
	maxDiffBytes = 2 << 20
	maxDiffLines = 20000
)

// highlightDiff splits a unified diff into lines and colours the code in
// them by the language of each file's name. It reports whether it cut the
// patch short.
func highlightDiff(patch string) (lines []diffLine, cut bool) {
	if len(patch) > maxDiffBytes {
		patch, cut = patch[:maxDiffBytes], true
	}
	var lang *language
	for i, text := range strings.Split(strings.TrimRight(patch, "\n"), "\n") {
		if i >= maxDiffLines {
			return lines, true
		}
		text = cleanTerminal(text)
		switch {
		case strings.HasPrefix(text, "diff --git "):
			lines = append(lines, diffLine{Class: "file", Segs: []seg{{Text: text}}})
			f := strings.Fields(text)
			lang = languageOf(f[len(f)-1])
		case strings.HasPrefix(text, "+++ "), strings.HasPrefix(text, "--- "),
			strings.HasPrefix(text, "index "), strings.HasPrefix(text, "new file"),
			strings.HasPrefix(text, "deleted file"), strings.HasPrefix(text, "similarity"),
			strings.HasPrefix(text, "rename "), strings.HasPrefix(text, "old mode"),
			strings.HasPrefix(text, "new mode"), strings.HasPrefix(text, "Binary files"),
			strings.HasPrefix(text, `\ No newline`):
			lines = append(lines, diffLine{Class: "meta", Segs: []seg{{Text: text}}})
		case strings.HasPrefix(text, "@@"):
			lines = append(lines, diffLine{Class: "hunk", Segs: []seg{{Text: text}}})
		case strings.HasPrefix(text, "+"):
			lines = append(lines, diffLine{Class: "add", Segs: append([]seg{{Text: "+"}}, lang.tokens(text[1:])...)})
		case strings.HasPrefix(text, "-"):
			lines = append(lines, diffLine{Class: "del", Segs: append([]seg{{Text: "-"}}, lang.tokens(text[1:])...)})
		case strings.HasPrefix(text, " "):
			lines = append(lines, diffLine{Class: "ctx", Segs: append([]seg{{Text: " "}}, lang.tokens(text[1:])...)})
		default:
			lines = append(lines, diffLine{Class: "meta", Segs: []seg{{Text: text}}})
		}
	}
	return lines, cut
}

// language is what the tiny highlighter knows of a language: its line
// comment, its keywords and its quotes.
type language struct {
	comment  string
	block    bool // /* ... */ on one line
	keywords map[string]bool
	quotes   string
}

func words(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

var (
	langGo = &language{comment: "//", block: true, quotes: "\"'`", keywords: words(`break case chan const continue default
		defer else fallthrough for func go goto if import interface map package range return select struct switch type
		var nil true false iota`)}
	langC = &language{comment: "//", block: true, quotes: "\"'`", keywords: words(`auto break case catch class const
		continue default delete do else enum export extends false final finally for fn function if impl import in
		instanceof interface let match mod mut new null private protected pub public return self static struct super
		switch this throw throws true try type typeof use var void while yield async await def val`)}
	langHash = &language{comment: "#", quotes: "\"'", keywords: words(`and as assert async await break case class
		continue def del do done elif else esac except fi finally for from function global if import in is lambda
		local None not or pass raise return then True False try until while with yield end module require`)}
	langSQL = &language{comment: "--", quotes: "'\"", keywords: words(`select from where insert into update delete
		create table drop alter join left right inner outer on group by order having limit and or not null as values set
		SELECT FROM WHERE INSERT INTO UPDATE DELETE CREATE TABLE DROP ALTER JOIN ON GROUP BY ORDER AND OR NOT NULL AS`)}
	langPlain = &language{}
)

func languageOf(name string) *language {
	name = strings.TrimPrefix(name, "b/")
	switch ext := strings.ToLower(path.Ext(name)); ext {
	case ".go":
		return langGo
	case ".c", ".h", ".cc", ".cpp", ".hpp", ".java", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".rs", ".swift", ".kt",
		".cs", ".scala", ".dart", ".php", ".css", ".scss", ".json":
		return langC
	case ".py", ".sh", ".bash", ".rb", ".yaml", ".yml", ".toml", ".pl", ".r", ".ex", ".exs", ".tf", ".conf":
		return langHash
	case ".sql":
		return langSQL
	}
	switch path.Base(name) {
	case "Makefile", "Dockerfile", "Gemfile", "Rakefile", ".gitignore":
		return langHash
	}
	return langPlain
}

// tokens colours one line of code. A nil language is plain text.
func (l *language) tokens(s string) []seg {
	if l == nil || l == langPlain || s == "" {
		return []seg{{Text: s}}
	}
	var out []seg
	plain := 0 // start of the pending plain run
	emit := func(start, end int, class string) {
		if plain < start {
			out = append(out, seg{Text: s[plain:start]})
		}
		out = append(out, seg{Class: class, Text: s[start:end]})
		plain = end
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case l.comment != "" && strings.HasPrefix(s[i:], l.comment):
			emit(i, len(s), "com")
			return out
		case l.block && strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				emit(i, len(s), "com")
				return out
			}
			emit(i, i+2+end+2, "com")
			i += 2 + end + 2
		case strings.IndexByte(l.quotes, c) >= 0:
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			j = min(j+1, len(s))
			emit(i, j, "str")
			i = j
		case c >= '0' && c <= '9' && (i == 0 || !identByte(s[i-1])):
			j := i
			for j < len(s) && (identByte(s[j]) || s[j] == '.') {
				j++
			}
			emit(i, j, "num")
			i = j
		case identByte(c):
			j := i
			for j < len(s) && identByte(s[j]) {
				j++
			}
			if l.keywords[s[i:j]] {
				emit(i, j, "kw")
			}
			i = j
		default:
			i++
		}
	}
	if plain < len(s) {
		out = append(out, seg{Text: s[plain:]})
	}
	return out
}

func identByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
