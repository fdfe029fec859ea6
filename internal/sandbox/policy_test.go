package sandbox

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A sandbox for compiling policies only; nothing is started with it.
func compileOnly(t *testing.T, p Policy) *Confinement {
	t.Helper()
	sb := &Sandbox{support: Support{ABI: MinABI}, exe: "/proc/self/exe"}
	c, err := sb.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rulesUnder returns the rules at or beneath root, as "kind rel".
func rulesUnder(c *Confinement, root string) []string {
	var out []string
	for _, r := range c.rules {
		if inside(root, r.path) {
			rel, _ := filepath.Rel(root, r.path)
			out = append(out, r.kind.String()+" "+rel)
		}
	}
	return out
}

func TestSiblingExpansion(t *testing.T) {
	root := t.TempDir()
	tree(t, root, "etc/hosts", "etc/ssl/cert.pem", "etc/drover/worker.creds", "etc/drover/worker.yaml",
		"etc/drover/public.txt", "etc/drover/keys/tls.key", "etc/drover/keys/ca.pem", "etc/empty/")
	etc := filepath.Join(root, "etc")
	c := compileOnly(t, Policy{
		Extra: []Grant{{Path: etc}},
		Deny: []string{filepath.Join(etc, "drover/worker.creds"), filepath.Join(etc, "drover/worker.yaml"),
			filepath.Join(etc, "drover/keys/tls.key")},
	})
	got := rulesUnder(c, etc)
	want := []string{"read drover/keys/ca.pem", "read drover/public.txt", "read empty", "read hosts", "read ssl"}
	if !slices.Equal(got, want) {
		t.Errorf("rules under the granted dir:\n got %q\nwant %q", got, want)
	}
	for _, p := range []string{"drover/worker.creds", "drover/keys/tls.key", "drover/keys/new-secret"} {
		if c.Readable(filepath.Join(etc, p)) {
			t.Errorf("%s is readable", p)
		}
	}
	for _, p := range []string{"hosts", "ssl/cert.pem", "ssl/later.pem", "drover/public.txt"} {
		if !c.Readable(filepath.Join(etc, p)) {
			t.Errorf("%s is not readable", p)
		}
	}
}

func TestDenyWinsOverExtraButNotOwn(t *testing.T) {
	root := t.TempDir()
	tree(t, root, "work/repos/a.git/objects/x", "work/repos/a.git/config", "work/worktrees/mine/f",
		"work/worktrees/other/f", "home/.ssh/id_ed25519", "home/.cache/x", "opt/tool/bin/t")
	p := func(rel string) string { return filepath.Join(root, rel) }
	c := compileOnly(t, Policy{
		Own:   []Grant{{Path: p("work/worktrees/mine"), Write: true}, {Path: p("work/repos/a.git/objects")}},
		Extra: []Grant{{Path: p("work")}, {Path: p("work/worktrees/other"), Write: true}, {Path: p("home")}, {Path: p("opt/tool")}},
		Deny:  []string{p("work"), p("home/.ssh")},
	})
	if got, want := rulesUnder(c, root), []string{
		"read home/.cache", "read opt/tool", "read work/repos/a.git/objects", "write work/worktrees/mine",
	}; !slices.Equal(got, want) {
		t.Errorf("rules:\n got %q\nwant %q", got, want)
	}
	if !c.Writable(p("work/worktrees/mine/new.txt")) || c.Writable(p("work/worktrees/other/f")) || c.Readable(p("work/repos/a.git/config")) {
		t.Error("own paths must stay granted and nothing else of the denied work dir")
	}
	var dropped []string
	for _, d := range c.Describe() {
		if strings.HasPrefix(d, "dropped ") {
			dropped = append(dropped, d)
		}
	}
	if len(dropped) != 2 {
		t.Errorf("want the two Extra grants inside the work dir reported dropped, got %q", dropped)
	}
}

func TestSymlinksAreResolvedAndNeverGranted(t *testing.T) {
	root := t.TempDir()
	tree(t, root, "secrets/creds", "shared/visible", "real/data")
	p := func(rel string) string { return filepath.Join(root, rel) }
	// A link in a granted directory to the secrets: expanding around a
	// denied entry must not turn it into a rule on its target.
	if err := os.Symlink(p("secrets"), p("shared/to-secrets")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p("real"), p("link-to-real")); err != nil {
		t.Fatal(err)
	}
	tree(t, root, "shared/private/key", "shared/private/other")
	c := compileOnly(t, Policy{
		// Granted through a link: the rule is on the target.
		Extra: []Grant{{Path: p("shared")}, {Path: p("link-to-real")}},
		// Denied through a link: resolved too.
		Deny: []string{p("shared/private/key"), p("shared/to-secrets/creds")},
	})
	if got, want := rulesUnder(c, root), []string{"read real", "read shared/private/other", "read shared/visible"}; !slices.Equal(got, want) {
		t.Errorf("rules:\n got %q\nwant %q", got, want)
	}
	if c.Readable(p("secrets/creds")) || c.Readable(p("shared/to-secrets/creds")) {
		t.Error("the secret is readable through the link")
	}
}

func TestCompileRefuses(t *testing.T) {
	sb := &Sandbox{support: Support{ABI: MinABI}}
	for name, p := range map[string]Policy{
		"relative own path": {Own: []Grant{{Path: "work/wt"}}},
		"missing own path":  {Own: []Grant{{Path: "/nonexistent/drover/wt"}}},
		"relative deny":     {Deny: []string{"etc/drover"}},
	} {
		if _, err := sb.Compile(p); err == nil {
			t.Errorf("%s: compiled", name)
		}
	}
	// A missing Extra path is skipped, not an error: hosts differ.
	if _, err := sb.Compile(Policy{Extra: []Grant{{Path: "/nonexistent/drover/opt"}}}); err != nil {
		t.Errorf("missing extra path: %v", err)
	}
}

func TestDeniedGrantIsDropped(t *testing.T) {
	root := t.TempDir()
	tree(t, root, "data/x")
	c := compileOnly(t, Policy{Own: []Grant{{Path: filepath.Join(root, "data"), Write: true}}, Deny: []string{filepath.Join(root, "data")}})
	if c.Readable(filepath.Join(root, "data/x")) {
		t.Error("a grant equal to a denied path is granted")
	}
}

// TestExpansionProperty compiles random policies over random trees and
// checks the two things expansion promises: no rule is on a denied path or
// above one (Landlock would grant everything beneath it), and everything
// that existed under a grant, outside the denied paths and not behind a
// symlink, is still granted.
func TestExpansionProperty(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			root := t.TempDir()
			var files, dirs []string
			var mk func(dir string, depth int)
			mk = func(dir string, depth int) {
				for i := range rng.IntN(4) + 1 {
					p := filepath.Join(dir, fmt.Sprintf("e%d", i))
					if depth < 3 && rng.IntN(2) == 0 {
						if err := os.Mkdir(p, 0o755); err != nil {
							t.Fatal(err)
						}
						dirs = append(dirs, p)
						mk(p, depth+1)
						continue
					}
					if err := os.WriteFile(p, nil, 0o644); err != nil {
						t.Fatal(err)
					}
					files = append(files, p)
				}
			}
			mk(root, 0)
			all := append(slices.Clone(files), dirs...)
			pick := func(n int) []string {
				var out []string
				for range n {
					out = append(out, all[rng.IntN(len(all))])
				}
				return out
			}
			var grants []Grant
			for _, g := range append(pick(rng.IntN(3)+1), root) {
				grants = append(grants, Grant{Path: g, Write: rng.IntN(2) == 0})
			}
			deny := pick(rng.IntN(4) + 1)
			c := compileOnly(t, Policy{Extra: grants, Deny: deny})
			for _, r := range rulesUnder(c, root) {
				rel := strings.SplitN(r, " ", 2)[1]
				p := filepath.Join(root, rel)
				for _, d := range deny {
					if inside(p, d) {
						t.Fatalf("rule %q is on or above denied %s", r, d)
					}
				}
			}
			for _, f := range files {
				denied := false
				for _, d := range deny {
					denied = denied || inside(d, f)
				}
				if !denied && !c.Readable(f) {
					t.Errorf("%s: granted (under %s) and not denied, but not readable", f, root)
				}
				if denied && c.Readable(f) {
					t.Errorf("%s: denied but readable", f)
				}
			}
		})
	}
}

func TestWritableAndPorts(t *testing.T) {
	root := t.TempDir()
	tree(t, root, "wt/f", "ro/f")
	c := compileOnly(t, Policy{
		Own:     []Grant{{Path: filepath.Join(root, "wt"), Write: true}, {Path: filepath.Join(root, "ro")}},
		Connect: []uint16{443, 8080, 443},
		Bind:    []uint16{0},
	})
	if !c.Writable(filepath.Join(root, "wt/new/deep")) || c.Writable(filepath.Join(root, "ro/f")) || c.Writable("/etc/hosts") {
		t.Error("Writable")
	}
	if !c.Readable(filepath.Join(root, "ro/f")) || !c.Readable("/usr/bin") || c.Readable(filepath.Join(root, "elsewhere")) {
		t.Error("Readable")
	}
	if !c.ConnectAllowed(443) || !c.ConnectAllowed(8080) || c.ConnectAllowed(4222) {
		t.Error("ConnectAllowed")
	}
	d := strings.Join(c.Describe(), "\n")
	for _, want := range []string{"write " + filepath.Join(root, "wt"), "connect tcp/443", "connect tcp/8080", "bind tcp/0", "device /dev/null", "read /usr"} {
		if !strings.Contains(d, want) {
			t.Errorf("Describe lacks %q:\n%s", want, d)
		}
	}
}

func TestSupport(t *testing.T) {
	for _, tc := range []struct {
		s      Support
		usable bool
		says   string
	}{
		{Support{}, false, "no Landlock"},
		{Support{Err: fmt.Errorf("disabled at boot")}, false, "disabled at boot"},
		{Support{ABI: 3}, false, "no TCP control (ABI 4)"},
		{Support{ABI: 1}, false, "no renames across directories"},
		{Support{ABI: 4}, true, "landlock ABI 4: ioctl on devices not limited (ABI 5), signals and abstract unix sockets not scoped (ABI 6)"},
		{Support{ABI: 7}, true, "landlock ABI 7: unix sockets by path not limited (ABI 9)"},
		{Support{ABI: 10}, true, "landlock ABI 10"},
	} {
		err := tc.s.Usable()
		if (err == nil) != tc.usable || !strings.Contains(tc.s.String(), tc.says) {
			t.Errorf("%+v: Usable %v, String %q; want usable %v, saying %q", tc.s, err, tc.s, tc.usable, tc.says)
		}
		if _, err := New(tc.s); (err == nil) != tc.usable {
			t.Errorf("%+v: New: %v", tc.s, err)
		}
	}
}

// TestNestedRulesDropped: a rule beneath one that grants all it does is
// left out (Landlock unions rules along the path); one granting more stays.
func TestNestedRulesDropped(t *testing.T) {
	root := t.TempDir()
	tree(t, root, "ro/bin/tool", "ro/state/", "rw/sub/f", "rw/file")
	p := func(rel string) string { return filepath.Join(root, rel) }
	c := compileOnly(t, Policy{
		Own:  []Grant{{Path: p("ro")}, {Path: p("ro/state"), Write: true}, {Path: p("rw"), Write: true}, {Path: p("rw/sub")}, {Path: p("rw/file"), Write: true}},
		PATH: []string{p("ro/bin")},
	})
	if got, want := rulesUnder(c, root), []string{"read ro", "write ro/state", "write rw"}; !slices.Equal(got, want) {
		t.Errorf("rules:\n got %q\nwant %q", got, want)
	}
}
