package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/drover-dev/drover/internal/exectest"
)

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func executable(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := exectest.WriteExecutable(p, []byte(body)); err != nil {
		t.Fatal(err)
	}
}

func TestInstallDirs(t *testing.T) {
	root := t.TempDir()
	p := func(rel string) string { return filepath.Join(root, rel) }
	// An npm prefix: the bin link, the package with a JS entry point, its
	// native part in a sibling package; node in an nvm-like prefix.
	executable(t, p("npm/node_modules/@openai/codex/bin/codex.js"), "#!/usr/bin/env node\nrequire('x')\n")
	executable(t, p("npm/node_modules/@openai/codex-linux-x64/vendor/codex"), "\x7fELF")
	symlink(t, "../@openai/codex/bin/codex.js", p("npm/node_modules/.bin/codex"))
	executable(t, p("nvm/versions/node/v22/bin/node"), "\x7fELF")
	// Bun: ~/.bun/bin/bun, its cache beside.
	executable(t, p("home/.bun/bin/bun"), "\x7fELF")
	// A script naming its interpreter by path.
	executable(t, p("tools/run.sh"), "#!"+p("nvm/versions/node/v22/bin/node")+" --flag\n")
	path := []string{p("nvm/versions/node/v22/bin"), "relative/ignored"}

	for _, tc := range []struct {
		exec string
		want []string
	}{
		{p("npm/node_modules/.bin/codex"), []string{
			p("npm/node_modules/.bin"), p("npm/node_modules/@openai/codex/bin"), p("npm/node_modules/@openai/codex"),
			p("npm/node_modules"), p("nvm/versions/node/v22/bin"), p("nvm/versions/node/v22"),
		}},
		{p("home/.bun/bin/bun"), []string{p("home/.bun/bin"), p("home/.bun")}},
		{p("tools/run.sh"), []string{p("tools"), p("nvm/versions/node/v22/bin"), p("nvm/versions/node/v22")}},
		{p("missing/cli"), []string{p("missing")}},
	} {
		got := InstallDirs(tc.exec, path)
		if !slices.Equal(got, tc.want) {
			t.Errorf("InstallDirs(%s):\n got %q\nwant %q", tc.exec, got, tc.want)
		}
	}
}
