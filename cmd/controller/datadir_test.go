package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/exitcode"
)

// A data dir given explicitly must be one a controller serves: a mistyped
// one is an error naming it, not whichever controller listens at
// nats.listen (here, a live one, as on its default 127.0.0.1:4222). Only
// the default data dir falls back to that address.
func TestMistypedDataDirReachesNoController(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	c := startController(t)
	id := c.submit(t, "hello")
	// What a command would dial without nats.url: the live controller.
	t.Setenv("DROVER_NATS_LISTEN", strings.TrimPrefix(c.url, "nats://"))

	empty := t.TempDir()
	garbage := t.TempDir()
	if err := os.WriteFile(filepath.Join(garbage, "nats.url"), []byte("not a url\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{"a dir that does not exist", []string{"status", "--data-dir", "/nonexistent/drover"}, nil,
			exitcode.Unreachable, "data dir /nonexistent/drover does not exist"},
		{"cancel with a dir that does not exist", []string{"cancel", id, "--data-dir", "/nonexistent/typo"}, nil,
			exitcode.Unreachable, "data dir /nonexistent/typo does not exist"},
		{"DROVER_DATA_DIR that does not exist", []string{"status"}, map[string]string{"DROVER_DATA_DIR": "/nonexistent/drover"},
			exitcode.Unreachable, "data dir /nonexistent/drover does not exist"},
		{"a dir without nats.url", []string{"cancel", id, "--data-dir", empty}, nil,
			exitcode.Unreachable, "data dir " + empty + " holds no nats.url: no controller serves it"},
		{"a nats.url that holds no URL", []string{"status", "--data-dir", garbage}, nil,
			exitcode.Usage, filepath.Join(garbage, "nats.url") + `: holds "not a url", not a NATS URL`},
		{"the default dir falls back", []string{"status", id}, nil, exitcode.OK, ""},
		{"the controller's own dir", []string{"status", id, "--data-dir", c.dir}, nil, exitcode.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			r := cli(t, context.Background(), nil, nil, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
			}
		})
	}
	if r := cli(t, context.Background(), nil, nil, "status", id, "--data-dir", c.dir); r.code != 0 || !strings.Contains(r.stdout, "running") {
		t.Errorf("the flow after the mistyped cancels: exit %d, %q", r.code, r.stdout)
	}
}
