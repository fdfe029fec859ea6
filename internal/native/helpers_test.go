package native_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-dev/drover/internal/native"
	"github.com/drover-dev/drover/internal/native/model"
	"github.com/drover-dev/drover/internal/native/nativetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The SDKs' HTTP transports keep idle connections to test servers
		// that have closed; they go with the next GC, not with the test.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// env is one attempt's surroundings: a worktree with a few files, an
// outside directory, a fake clock.
type env struct {
	dir, wt, tmp string
	clock        *nativetest.FakeClock
	out          *syncBuffer
}

func newEnv(t testing.TB) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{dir: dir, wt: filepath.Join(dir, "wt"), tmp: filepath.Join(dir, "tmp"), clock: nativetest.NewFakeClock(epoch), out: &syncBuffer{}}
	for p, c := range map[string]string{
		"wt/main.go":     "package main\n\nfunc main() {\n\tprintln(\"helo\")\n}\n",
		"wt/README.md":   "# demo\n",
		"outside/secret": "s3cret\n",
	} {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(e.tmp, 0o755)
	return e
}

func (e *env) runtime(cfg native.Config, c model.Client) *native.Runtime {
	if cfg.Provider == "" {
		cfg.Provider = "mock"
	}
	if cfg.Model == "" {
		cfg.Model = "mock-model"
	}
	return native.NewRuntime("test-native", cfg, c).WithClock(e.clock)
}

func (e *env) input(prompt string) *native.Input {
	return &native.Input{Prompt: prompt, Worktree: e.wt, TempDir: e.tmp, Env: []string{"DROVER_TASK_ID=t1"}}
}

func (e *env) read(t testing.TB, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.wt, rel))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// events decodes what a run wrote.
func (e *env) events(t testing.TB) []native.Event {
	t.Helper()
	var out []native.Event
	sc := bufio.NewScanner(bytes.NewReader(e.out.Bytes()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var ev native.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("event line %q: %v", sc.Text(), err)
		}
		out = append(out, ev)
	}
	return out
}

func types(evs []native.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Type))
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for the loop's writes and a test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

func usage(in, out int64) model.Usage { return model.Usage{InputTokens: in, OutputTokens: out} }

func writeFile(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
