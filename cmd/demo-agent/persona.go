package main

// Persona mode: demo-agent impersonates one of the real coding-agent CLIs,
// for adapter tests. It takes that CLI's headless command line (as
// docs/runtimes.md records it) and refuses anything else with exit 2, gets
// the prompt where that CLI does, runs the prompt's directives, and replays
// the output of a real recorded run of the CLI (replay.go).

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// persona is one CLI's headless command line.
type persona struct {
	version string // what --version prints
	usage   string // the headless synopsis, shown with argv errors
	command string // the subcommand a headless run needs ("exec", "run"), if any
	print   string // the boolean flag a headless run needs (claude and pi: -p/--print), if any
	prompt  string // the flag whose value is the prompt; "" means positional
	words   bool   // several positional words make one prompt (opencode, kilo)
	format  string // the output flag the recordings used ("--mode json"); "" when quirks handle it
	dir     string // the flag that changes the working directory, if any
	// Every accepted flag: spellings separated by commas, the last one
	// naming it; "=" if it takes a value, then its choices if limited.
	flags  []string
	quirks func(*invocation) *quit // CLI-specific checks and output tweaks
}

var personas = map[string]*persona{
	"claude": {
		version: "2.1.197 (Claude Code)",
		usage:   "claude -p [options] [prompt]",
		print:   "print",
		flags: []string{"-p,--print", "--output-format=text|json|stream-json", "--verbose",
			"--dangerously-skip-permissions", "--permission-mode=acceptEdits|bypassPermissions|default|dontAsk|plan", "--model="},
		quirks: claudeQuirks,
	},
	"codex": {
		version: "codex-cli 0.169.0",
		usage:   "codex exec [OPTIONS] [PROMPT]",
		command: "exec",
		format:  "--json",
		dir:     "cd",
		flags: []string{"--json", "--skip-git-repo-check", "--yolo,--dangerously-bypass-approvals-and-sandbox",
			"-m,--model=", "-c,--config=", "-C,--cd="},
		quirks: codexQuirks,
	},
	"opencode": opencodeFork("opencode", "1.18.33"),
	"kilo":     opencodeFork("kilo", "7.7.7"),
	"gemini": {
		version: "0.61.0",
		usage:   "gemini -p PROMPT [options]",
		prompt:  "prompt",
		format:  "--output-format stream-json",
		flags: []string{"-p,--prompt=", "-o,--output-format=text|json|stream-json", "-y,--yolo", "--skip-trust",
			"-m,--model=", "--approval-mode=default|auto_edit|yolo|plan"},
		quirks: geminiQuirks,
	},
	"pi": {
		version: "0.73.1",
		usage:   "pi -p [options] [message]",
		print:   "print",
		format:  "--mode json",
		flags:   []string{"-p,--print", "--mode=text|json|rpc", "--provider=", "--model=", "--no-session"},
	},
	"copilot": {
		version: "GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.",
		usage:   "copilot -p PROMPT [options]",
		prompt:  "prompt",
		format:  "--output-format json",
		dir:     "C",
		flags: []string{"-p,--prompt=", "--output-format=text|json", "--allow-all-tools",
			"--disable-client-telemetry", "--no-auto-update", "--model=", "-C="},
	},
}

// opencodeFork is opencode's command line; kilo is a fork with the same one.
func opencodeFork(name, version string) *persona {
	return &persona{
		version: version,
		usage:   name + " run [message..]",
		command: "run",
		words:   true,
		format:  "--format json",
		dir:     "dir",
		flags:   []string{"--format=default|json", "--auto", "-m,--model=", "--dir="},
	}
}

// personaArgs tells whether to run as a persona: when invoked under a
// CLI's name, or as `demo-agent --persona NAME ARGS...`.
func personaArgs(argv0 string, args []string) (name string, rest []string, ok bool) {
	if base := filepath.Base(argv0); personas[base] != nil {
		return base, args, true
	}
	if len(args) > 0 {
		if name, ok := strings.CutPrefix(args[0], "--persona="); ok {
			return name, args[1:], true
		}
		if args[0] == "--persona" {
			if len(args) == 1 {
				return "", nil, true
			}
			return args[1], args[2:], true
		}
	}
	return "", nil, false
}

// invocation is a parsed persona command line.
type invocation struct {
	name    string
	p       *persona
	command bool              // the subcommand was given
	opts    map[string]string // flag name → value, "true" for a boolean flag
	args    []string          // positional arguments after the subcommand

	// Set by quirks: the CLI would not write the file, and a rewrite of
	// the replayed stdout to match the command line.
	noFile  bool
	rewrite func(stdout string) string
}

func (inv *invocation) has(flag string) bool { _, ok := inv.opts[flag]; return ok }

// quit ends a persona run early the way the real CLI does.
type quit struct {
	code int
	msg  string // printed on stderr as is
}

type flagSpec struct {
	name    string // the last spelling without dashes: "output-format"
	value   bool
	choices []string
}

// parse reads a command line the way the CLI's option parser would, minus
// its leniencies: anything not in the table is an error.
func (p *persona) parse(name string, args []string) (*invocation, error) {
	specs := map[string]flagSpec{}
	for _, f := range append([]string{"--version", "-h,--help"}, p.flags...) {
		spellings, choices, value := strings.Cut(f, "=")
		names := strings.Split(spellings, ",")
		s := flagSpec{name: strings.TrimLeft(names[len(names)-1], "-"), value: value}
		if choices != "" {
			s.choices = strings.Split(choices, "|")
		}
		for _, n := range names {
			specs[n] = s
		}
	}
	inv := &invocation{name: name, p: p, opts: map[string]string{}}
	if p.command != "" && len(args) > 0 && args[0] == p.command {
		inv.command, args = true, args[1:]
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			inv.args = append(inv.args, args[i+1:]...)
			break
		}
		if len(arg) < 2 || arg[0] != '-' { // "-" is a positional (stdin)
			inv.args = append(inv.args, arg)
			continue
		}
		flag, val, hasVal := arg, "", false
		if strings.HasPrefix(arg, "--") {
			flag, val, hasVal = strings.Cut(arg, "=")
		}
		s, ok := specs[flag]
		switch {
		case !ok:
			return nil, fmt.Errorf("unknown option '%s'", flag)
		case !s.value && hasVal:
			return nil, fmt.Errorf("option '%s' takes no value", flag)
		case !s.value:
			val = "true"
		case !hasVal && i+1 == len(args):
			return nil, fmt.Errorf("option '%s' argument missing", flag)
		case !hasVal:
			i++
			val = args[i]
		}
		if s.choices != nil && !slices.Contains(s.choices, val) {
			return nil, fmt.Errorf("option '%s' argument '%s' is invalid; allowed choices are %s", flag, val, strings.Join(s.choices, ", "))
		}
		inv.opts[s.name] = val
	}
	maxArgs := 1 // the prompt
	switch {
	case p.prompt != "":
		maxArgs = 0
	case p.words:
		maxArgs = len(inv.args)
	}
	if len(inv.args) > maxArgs {
		return nil, fmt.Errorf("unexpected argument '%s'", inv.args[maxArgs])
	}
	return inv, nil
}

// headless checks that the command line asks for a headless run in the
// recorded output format: the only runs there are recordings of.
func (inv *invocation) headless() error {
	p := inv.p
	switch {
	case p.command != "" && !inv.command:
		return fmt.Errorf("the %s persona plays only headless runs: %s", inv.name, p.usage)
	case p.print != "" && !inv.has(p.print):
		return fmt.Errorf("the %s persona plays only headless runs: pass -p/--print", inv.name)
	case p.format == "":
		return nil
	}
	flag, want, _ := strings.Cut(p.format, " ")
	if inv.opts[strings.TrimLeft(flag, "-")] != cmp.Or(want, "true") {
		return fmt.Errorf("only `%s` output was recorded for %s; pass %s", p.format, inv.name, p.format)
	}
	return nil
}

// readPrompt gets the prompt where the CLI takes it: the prompt argument
// (a flag's value, or the positional words), after whatever is piped on
// stdin. "-" as the argument means stdin only (codex's convention).
func (inv *invocation) readPrompt(stdin io.Reader) (string, error) {
	arg, given := "", false
	if inv.p.prompt != "" {
		arg, given = inv.opts[inv.p.prompt]
	} else if len(inv.args) > 0 {
		arg, given = strings.Join(inv.args, " "), true
	}
	var parts []string
	if isPiped(stdin) {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return "", fmt.Errorf("reading the prompt from stdin: %w", err)
		}
		if len(b) > 0 {
			parts = append(parts, string(b))
		}
	}
	if given && arg != "-" {
		parts = append(parts, arg)
	}
	if len(parts) == 0 {
		return "", fmt.Errorf("no prompt: give it on the command line (%s) or pipe it on stdin", inv.p.usage)
	}
	return strings.Join(parts, "\n\n"), nil
}

// isPiped reports whether stdin can carry a prompt: anything but a
// character device (a terminal, or /dev/null).
func isPiped(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return true
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice == 0
}

// runPersona is persona mode's whole program; it returns the exit code.
func runPersona(name string, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	p := personas[name]
	if p == nil {
		names := strings.Join(slices.Sorted(maps.Keys(personas)), ", ")
		fmt.Fprintf(stderr, "demo-agent: --persona wants one of %s, got %q\n", names, name)
		return exitUsage
	}
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, "demo-agent:", err)
		return code
	}
	inv, err := p.parse(name, args)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\nUsage: %s\n", err, p.usage)
		return exitUsage
	}
	switch {
	case inv.has("help"):
		fmt.Fprintf(stdout, "Usage: %s\n\n(demo-agent playing %s: see docs/demo-agent.md)\n", p.usage, name)
		return exitOK
	case inv.has("version"):
		fmt.Fprintln(stdout, p.version)
		return exitOK
	}
	if err := inv.headless(); err != nil {
		return fail(exitUsage, err)
	}
	// Found before any -C/--dir, so a relative DEMO_AGENT_TRANSCRIPTS and
	// the upward search start where the process was started.
	transcripts, err := transcriptsDir()
	if err != nil {
		return fail(exitUsage, err)
	}
	if dir := inv.opts[p.dir]; p.dir != "" && dir != "" {
		if err := os.Chdir(dir); err != nil {
			return fail(exitFailed, err)
		}
	}
	if p.quirks != nil {
		if q := p.quirks(inv); q != nil {
			fmt.Fprint(stderr, q.msg)
			return q.code
		}
	}
	prompt, err := inv.readPrompt(stdin)
	if err != nil {
		return fail(exitUsage, err)
	}
	ds, err := parse(prompt)
	if err != nil {
		return fail(exitUsage, err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fail(exitFailed, err)
	}
	// Every recording the prompt names must exist, also those of @case
	// lines meant for other attempts: a typo fails every attempt.
	recs := map[string]*recording{}
	for _, d := range ds {
		if d.name == "call-model" && !callModelCLIs[name] {
			return fail(exitUsage, fmt.Errorf("line %d: @call-model: the %s persona makes no model requests (codex and pi do)", d.line, name))
		}
		if d.name == "case" && recs[d.text] == nil {
			if recs[d.text], err = loadRecording(transcripts, name, d.text, cwd); err != nil {
				return fail(exitUsage, err)
			}
		}
	}
	ds, caseName, err := withCase(forAttempt(ds, attemptNumber(os.Getenv("DROVER_ATTEMPT_ID")), time.Now()))
	if err != nil {
		return fail(exitUsage, err)
	}
	rec := recs[caseName]
	if rec == nil { // the default @case success
		if rec, err = loadRecording(transcripts, name, caseName, cwd); err != nil {
			return fail(exitUsage, err)
		}
	}
	if inv.rewrite != nil {
		rec.stdout = inv.rewrite(rec.stdout)
	}
	rec.createsFile = rec.createsFile && !inv.noFile
	root, err := os.OpenRoot(cwd)
	if err != nil {
		return fail(exitFailed, err)
	}
	defer root.Close()
	a := &agent{root: root, cwd: cwd, stderr: stderr, out: &stream{w: stdout, quiet: true}, rec: rec}
	if callModelCLIs[name] {
		a.model = &modelCall{cli: name, provider: inv.opts["provider"], model: inv.opts["model"]}
	}
	code, msg := a.perform(ds)
	if msg != "" {
		fmt.Fprintln(stderr, "demo-agent:", msg)
	}
	return code
}

// withCase returns the directives with exactly one @case, appending
// "@case success" if the prompt has none, and the recording it names.
// ds are the directives of this attempt: a @case for another one does
// not count.
func withCase(ds []directive) ([]directive, string, error) {
	name := ""
	for _, d := range ds {
		if d.name == "case" {
			if name != "" {
				return nil, "", usagef("line %d: @case: only one @case per prompt", d.line)
			}
			name = d.text
		}
	}
	if name == "" {
		name = "success"
		ds = append(ds, directive{name: "case", text: name})
	}
	return ds, name, nil
}

// The quirks docs/runtimes.md records, where they are cheap to play.

// claudeQuirks: stream-json needs --verbose; root may not bypass
// permissions without IS_SANDBOX=1; without a bypass or acceptEdits the
// Write is denied (exit 0, no file, permission_denials in the result);
// json and text output are derived from the stream's result line.
func claudeQuirks(inv *invocation) *quit {
	mode := cmp.Or(inv.opts["permission-mode"], "default")
	if inv.has("dangerously-skip-permissions") {
		mode = "bypassPermissions"
	}
	if mode == "bypassPermissions" && os.Geteuid() == 0 && os.Getenv("IS_SANDBOX") != "1" {
		return &quit{exitFailed, "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n"}
	}
	format := cmp.Or(inv.opts["output-format"], "text")
	if format == "stream-json" && !inv.has("verbose") {
		return &quit{exitFailed, "Error: When using --print, --output-format=stream-json requires --verbose\n"}
	}
	inv.noFile = mode != "bypassPermissions" && mode != "acceptEdits"
	inv.rewrite = func(out string) string {
		out = strings.Replace(out, `"permissionMode":"bypassPermissions"`, `"permissionMode":"`+mode+`"`, 1)
		if m := claudeWrite.FindStringSubmatch(out); inv.noFile && m != nil {
			out = strings.Replace(out, `"permission_denials":[]`,
				`"permission_denials":[{"tool_name":"Write","tool_use_id":"`+m[1]+`","tool_input":`+m[2]+`}]`, 1)
		}
		last := out[strings.LastIndex(strings.TrimSuffix(out, "\n"), "\n")+1:]
		switch format {
		case "json":
			return last
		case "text":
			var res struct{ Result string }
			_ = json.Unmarshal([]byte(last), &res)
			return res.Result + "\n"
		}
		return out
	}
	return nil
}

// claudeWrite finds the Write tool call of a claude stream: its id and input.
var claudeWrite = regexp.MustCompile(`"id":"(toolu_[^"]*)","input":(\{"file_path":"[^"]*","content":"[^"]*"\}),"name":"Write"`)

// codexQuirks: codex exec refuses to run outside a git repository unless
// told to skip the check (or to bypass everything).
func codexQuirks(inv *invocation) *quit {
	if inv.has("skip-git-repo-check") || inv.has("dangerously-bypass-approvals-and-sandbox") {
		return nil
	}
	if cwd, err := os.Getwd(); err == nil {
		if _, inRepo := findUp(cwd, ".git"); inRepo {
			return nil
		}
	}
	return &quit{exitFailed, "Not inside a trusted directory and --skip-git-repo-check was not specified.\n"}
}

// geminiQuirks: a headless gemini in an untrusted folder exits 55.
func geminiQuirks(inv *invocation) *quit {
	if inv.has("skip-trust") || os.Getenv("GEMINI_CLI_TRUST_WORKSPACE") == "true" {
		return nil
	}
	msg := ""
	if inv.has("yolo") || inv.opts["approval-mode"] == "yolo" {
		msg = "YOLO mode is enabled. All tool calls will be automatically approved.\n" +
			"Approval mode overridden to \"default\" because the current folder is not trusted.\n"
	}
	return &quit{55, msg + "Gemini CLI is not running in a trusted directory. To proceed, either use `--skip-trust`, " +
		"set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, or trust this directory in interactive mode. " +
		"For more details, see https://geminicli.com/docs/cli/trusted-folders/#headless-and-automated-environments\n"}
}
