package config

import (
	"errors"
	"strings"
	"testing"
)

// TestPathsAndIDsFromConfig: the configuration values that become paths,
// subject tokens or keys are checked: a home file cannot leave HOME, a
// worker id, pool or runtime name cannot be more than one token.
func TestPathsAndIDsFromConfig(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, tc := range []struct{ file, key string }{
		{"runtimes:\n  x:\n    binary: x\n    home: isolated\n    home_files: [../.ssh/id_ed25519]\n", "runtimes.x.home_files"},
		{"runtimes:\n  x:\n    binary: x\n    home: isolated\n    home_files: [.claude/../../etc]\n", "runtimes.x.home_files"},
		{"runtimes:\n  x:\n    binary: x\n    home: isolated\n    home_files: [/etc/passwd]\n", "runtimes.x.home_files"},
		{"runtimes:\n  x:\n    binary: x\n    home: isolated\n    home_files: ['']\n", "runtimes.x.home_files"},
		{"worker:\n  id: a.b\n", "worker.id"},
		{"worker:\n  id: '*'\n", "worker.id"},
		{"worker:\n  id: ../w\n", "worker.id"},
		{"worker:\n  pool: '>'\n", "worker.pool"},
		{"worker:\n  pool: gpu_large\n", "worker.pool"},
		{"defaults:\n  pool: a b\n", "defaults.pool"},
		{"runtimes:\n  a.b:\n    binary: x\n", "runtimes[a]"}, // viper splits keys at dots
		{"projects:\n  a/b:\n    repo: /r\n", "projects.a/b"},
	} {
		_, err := Load(LoadOptions{File: writeFile(t, tc.file)})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%q: %v, want an error naming %s", tc.file, err, tc.key)
		}
	}
	if _, err := Load(LoadOptions{File: writeFile(t, "runtimes:\n  x:\n    binary: x\n    home: isolated\n    home_files: [.claude/settings.json, .config/x]\n")}); err != nil {
		t.Errorf("home files inside HOME: %v", err)
	}
}
