package adapter_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/adapter"
	"github.com/drover-dev/drover/internal/adapter/adaptertest"
	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/drovertype"
)

// The fake CLIs, built once by TestMain: demo-agent, and a symlink per
// persona (claude, codex, …) that makes it play that CLI.
var (
	fakeDir     string
	demoAgent   string
	transcripts string
)

// personas are the CLIs demo-agent can play (docs/demo-agent.md).
var personas = []string{"claude", "codex", "opencode", "kilo", "gemini", "pi", "copilot"}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "drover-adapter-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := buildFakes(dir); err != nil {
		fmt.Fprintln(os.Stderr, "adapter conformance:", err)
		return 1
	}
	return m.Run()
}

func buildFakes(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building demo-agent needs the go command: %w", err)
	}
	if out, err := exec.Command(goBin, "build", "-o", dir+string(filepath.Separator), "../../cmd/demo-agent").CombinedOutput(); err != nil {
		return fmt.Errorf("go build demo-agent: %v\n%s", err, out)
	}
	fakeDir, demoAgent = dir, filepath.Join(dir, "demo-agent")
	for _, p := range personas {
		if err := os.Symlink("demo-agent", filepath.Join(dir, p)); err != nil {
			return err
		}
	}
	transcripts, err = filepath.Abs("../../testdata/transcripts")
	if err != nil {
		return err
	}
	if _, err := os.Stat(transcripts); err != nil {
		return fmt.Errorf("recorded transcripts: %w", err)
	}
	return nil
}

// builtinRuntimes loads the built-in runtimes as a worker with no
// configuration would, with nothing of the developer's environment (HOME,
// DROVER_*) leaking in.
func builtinRuntimes(t *testing.T) map[string]config.Runtime {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "DROVER_") {
			t.Setenv(name, "") // restored after the test
			os.Unsetenv(name)
		}
	}
	cfg, err := config.Load(config.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Runtimes
}

// builtinCase is the conformance case for one built-in runtime, run by the
// fake CLI for its binary.
func builtinCase(t *testing.T, name string, rt config.Runtime) (adaptertest.Case, bool) {
	bin := filepath.Base(rt.Binary)
	c := adaptertest.Case{Name: name, Agent: adaptertest.AgentPrompts{Hang: "@hang"}}
	switch {
	case bin == "demo-agent":
		rt.Binary = demoAgent
		// The plain demo agent speaks claude stream-json: its rate limit is
		// the assistant line real claude prints (claude/fail-429), raw.
		// Its own result line carries no api_error_status, so no Status.
		c.Prompt = "create hello.txt containing hi\n@write hello.txt hi"
		c.FailPrompt = "create hello.txt containing hi\n" +
			`@stdout {"type":"system","subtype":"api_retry","attempt":1,"max_retries":1,"retry_delay_ms":1000,"error_status":429,"error":"rate_limit"}` + "\n" +
			`@stdout {"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"API Error: Request rejected (429) · rate limited"}]},"error":"rate_limit"}` + "\n" +
			"@stderr 429 Too Many Requests\n@exit 1"
		c.WantClassOnFail = drovertype.ClassRateLimited
	case slices.Contains(personas, bin):
		rt.Binary = filepath.Join(fakeDir, bin)
		c.Prompt = "create hello.txt containing hi\n@case success"
		c.FailPrompt = "create hello.txt containing hi\n@case fail-429"
		c.WantClassOnFail, c.WantStatusOnFail = drovertype.ClassRateLimited, 429
		// IS_SANDBOX=1: claude refuses to bypass permissions as root without it.
		c.Env = []string{"DEMO_AGENT_TRANSCRIPTS=" + transcripts, "IS_SANDBOX=1"}
	default:
		return c, false
	}
	c.New = func(t *testing.T) adapter.Adapter {
		a, err := adapter.New(name, rt)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	return c, true
}

// TestConformanceBuiltins runs the conformance suite for every built-in
// runtime against a fake CLI that parses the real CLI's headless flags, so
// each built-in argv is proven to be one the CLI accepts. A new built-in
// without a fake fails here.
func TestConformanceBuiltins(t *testing.T) {
	rts := builtinRuntimes(t)
	for _, want := range []string{"demo", "claude-code", "codex", "opencode", "kilo", "gemini", "pi", "copilot"} {
		if _, ok := rts[want]; !ok {
			t.Errorf("built-in runtime %s is missing", want)
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range rts {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		if name == "demo-review" {
			// A validator: it answers with a verdict and never edits files.
			// The attempt package's review tests run it.
			continue
		}
		rt := rts[name]
		c, ok := builtinCase(t, name, rt)
		if !ok {
			t.Errorf("built-in runtime %s: no fake CLI plays %q; teach demo-agent its persona", name, rt.Binary)
			continue
		}
		adaptertest.RunConformance(t, c)
		// The model flag is part of the argv too: the fake must accept it.
		if rt.ModelFlag != "" {
			rt.Model = "conformance-model"
			if len(rt.Models) > 0 {
				rt.Model = rt.Models[0]
			}
			if mc, ok := builtinCase(t, name, rt); ok {
				mc.Name += "+model"
				adaptertest.RunConformance(t, mc)
			}
		}
	}
}

// TestConformanceInputMethods: the prompt reaches the CLI whichever way a
// runtime delivers it (stdin, argument, file), through the plain demo agent.
func TestConformanceInputMethods(t *testing.T) {
	for _, rt := range []config.Runtime{
		{Input: "stdin"},
		{Input: "arg", PromptFlag: "-p"},
		{Input: "arg"},
		{Input: "file", PromptFlag: "--prompt-file"},
	} {
		rt.Binary, rt.Output, rt.VersionArgs = demoAgent, "claude-stream-json", []string{"--version"}
		name := "demo-" + rt.Input
		if rt.PromptFlag != "" {
			name += rt.PromptFlag
		}
		adaptertest.RunConformance(t, adaptertest.Case{
			Name:            name,
			New:             func(*testing.T) adapter.Adapter { return adapter.NewCommand(name, rt) },
			Prompt:          "create hello.txt containing hi\n@write hello.txt hi",
			FailPrompt:      "@stderr boom\n@exit 3",
			WantClassOnFail: drovertype.ClassRuntimeError,
			Agent:           adaptertest.AgentPrompts{Hang: "@hang"},
		})
	}
}
