package tools

import (
	"encoding/json"
	"fmt"

	"github.com/drover-dev/drover/internal/native/model"
)

// The definitions follow the names and argument names coding models are
// trained on, and say in their descriptions what a model needs to use them
// well without any other instructions: where paths are taken from, what is
// refused, how output is bounded.

func schema(s string) json.RawMessage {
	if !json.Valid([]byte(s)) {
		panic("tools: invalid schema: " + s) // caught by the package's tests
	}
	return json.RawMessage(s)
}

func defReadFile(s *Set) model.ToolDef {
	return model.ToolDef{
		Name: "read_file",
		Description: fmt.Sprintf(`Read a text file of the worktree. The path is relative to the worktree (%s) or absolute inside it. `+
			`Lines come numbered like "cat -n" (the numbers are not part of the file). At most %d lines are shown per call, and lines longer than %d characters are cut; `+
			`use offset (the first line, from 1) and limit to read a long file in parts. Binary files are not shown.`, s.dir, s.lim.ReadLines, s.lim.LineChars),
		Schema: schema(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The file to read."},` +
			`"offset":{"type":"integer","minimum":1,"description":"The first line to show, counting from 1. Defaults to 1."},` +
			`"limit":{"type":"integer","minimum":1,"description":"How many lines to show."}` +
			`},"required":["path"],"additionalProperties":false}`),
	}
}

func defWriteFile(s *Set) model.ToolDef {
	return model.ToolDef{
		Name: "write_file",
		Description: `Create a file, or replace a whole file, with the given content. Missing parent directories are created. ` +
			`The path is relative to the worktree or absolute inside it. Prefer edit_file to change part of an existing file. ` +
			`Paths outside the worktree, inside .git, or outside what this task may change (` + s.scopeText() + `) are refused.`,
		Schema: schema(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The file to write."},` +
			`"content":{"type":"string","description":"The complete new content of the file."}` +
			`},"required":["path","content"],"additionalProperties":false}`),
	}
}

func defEditFile(s *Set) model.ToolDef {
	return model.ToolDef{
		Name: "edit_file",
		Description: `Change a file by replacing an exact piece of its text. old_string must match the file exactly, including whitespace and indentation, ` +
			`and must occur exactly once unless replace_all is true; include enough surrounding lines to make it unique. Read the file first. ` +
			`Paths outside the worktree, inside .git, or outside what this task may change (` + s.scopeText() + `) are refused.`,
		Schema: schema(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The file to change."},` +
			`"old_string":{"type":"string","description":"The exact text to replace."},` +
			`"new_string":{"type":"string","description":"The text to put in its place."},` +
			`"replace_all":{"type":"boolean","description":"Replace every occurrence instead of exactly one. Defaults to false."}` +
			`},"required":["path","old_string","new_string"],"additionalProperties":false}`),
	}
}

func defListDir(s *Set) model.ToolDef {
	return model.ToolDef{
		Name: "list_dir",
		Description: fmt.Sprintf(`List the entries of a directory of the worktree: subdirectories end with "/", files show their size, symlinks their target. `+
			`The path defaults to the worktree itself. At most %d entries are shown.`, s.lim.Entries),
		Schema: schema(`{"type":"object","properties":{` +
			`"path":{"type":"string","description":"The directory to list. Defaults to the worktree."}` +
			`},"additionalProperties":false}`),
	}
}

func defGlob(s *Set) model.ToolDef {
	return model.ToolDef{
		Name: "glob",
		Description: fmt.Sprintf(`Find files by name with a glob pattern such as "**/*.go" or "src/**/test_*.py" ("**" matches any number of directories, "{a,b}" either). `+
			`The pattern is matched against paths relative to path, which defaults to the worktree; the results are relative to the worktree, sorted. `+
			`.git is skipped and symlinks are not followed. At most %d results are shown.`, s.lim.Entries),
		Schema: schema(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"The glob pattern."},` +
			`"path":{"type":"string","description":"The directory to search in. Defaults to the worktree."}` +
			`},"required":["pattern"],"additionalProperties":false}`),
	}
}

func defGrep(s *Set) model.ToolDef {
	return model.ToolDef{
		Name: "grep",
		Description: fmt.Sprintf(`Search file contents with a regular expression (RE2 syntax, as in Go and ripgrep; no backreferences or lookaround). `+
			`Prints matching lines as "path:line:text", paths relative to the worktree. Binary files and .git are skipped. `+
			`Narrow the search with path (a directory or one file) and glob (a file name pattern such as "*.go", or a path pattern relative to path when it contains "/"). `+
			`Up to %d matches are shown unless max_results says otherwise.`, s.lim.Matches),
		Schema: schema(`{"type":"object","properties":{` +
			`"pattern":{"type":"string","description":"The regular expression to search for."},` +
			`"path":{"type":"string","description":"A directory or file to search. Defaults to the worktree."},` +
			`"glob":{"type":"string","description":"Only search files whose name matches this glob, e.g. \"*.ts\"."},` +
			`"ignore_case":{"type":"boolean","description":"Match without regard to case. Defaults to false."},` +
			`"files_only":{"type":"boolean","description":"Print only the paths of files that match. Defaults to false."},` +
			`"max_results":{"type":"integer","minimum":1,"description":"The most matches to print."}` +
			`},"required":["pattern"],"additionalProperties":false}`),
	}
}

func defBash(s *Set) model.ToolDef {
	return model.ToolDef{
		Name: "bash",
		Description: fmt.Sprintf(`Run a shell command in the worktree (%s) and return its output (stdout and stderr together) and exit code. `+
			`Use it to build, run tests, or use git to inspect history. There is no terminal and no input: interactive programs fail. `+
			`The command times out after %s unless timeout (seconds, at most %d) says otherwise; then it and everything it started are killed. `+
			`Only the first and last %d KiB of the output are shown. Each call starts a fresh shell: cd and variables do not carry over. `+
			`Use read_file, write_file, edit_file, glob and grep rather than cat, sed, find or grep where you can.`,
			s.dir, s.lim.CommandTimeout, int(s.lim.CommandMaxTimeout.Seconds()), s.lim.CommandOutput>>11),
		Schema: schema(`{"type":"object","properties":{` +
			`"command":{"type":"string","description":"The command, as for bash -c."},` +
			`"timeout":{"type":"integer","minimum":1,"description":"Seconds before the command is killed."}` +
			`},"required":["command"],"additionalProperties":false}`),
	}
}
