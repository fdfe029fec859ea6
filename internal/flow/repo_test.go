package flow

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestRepoRejected: every way a repo string could make git run a program,
// read an option or reach a transport other than its own is refused with a
// message that says why.
func TestRepoRejected(t *testing.T) {
	for _, tc := range []struct{ repo, want string }{
		{"ext::sh -c touch% /tmp/pwned", "transport::address"},
		{"ext::/tmp/evil.sh", "transport::address"},
		{"fd::17", "transport::address"},
		{"EXT::x", "transport::address"},
		{"git+ext::x", "transport::address"},
		{"testgit::/srv/r", "transport::address"},
		{"-oProxyCommand=x", "starts with '-'"},
		{"--upload-pack=touch /tmp/pwned", "starts with '-'"},
		{"--config=core.sshCommand=x", "starts with '-'"},
		{"ssh://-oProxyCommand=x/repo", "host starting with '-'"},
		{"ssh://git@-oProxyCommand=x/repo", "host starting with '-'"},
		{"-oProxyCommand=x:repo", "starts with '-'"},
		{"git@-oProxyCommand=x:repo", "host starting with '-'"},
		{"foo://host/repo", `scheme "foo"`},
		{"persistent-https://host/repo", "remote helper"},
		{"https://host/repo\n--upload-pack=x", "control characters"},
		{"https://host/a b", "whitespace"},
		{"", "required"},
		{strings.Repeat("a", 5000), "limit"},
	} {
		err := ValidRepo(tc.repo)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ValidRepo(%.40q) = %v, want an error saying %q", tc.repo, err, tc.want)
		}
	}
	for _, ok := range []string{
		"https://github.com/drover-dev/drover.git", "HTTPS://host/r", "ssh://git@host:2222/r.git", "git://host/r",
		"file:///srv/git/r.git", "git+ssh://host/r", "git@github.com:org/r.git", "/srv/git/r.git", "./r.git",
		"/srv/a::b", "../a:b/repo",
	} {
		if err := ValidRepo(ok); err != nil {
			t.Errorf("ValidRepo(%q) = %v, want nil", ok, err)
		}
	}
}

func TestBaseRejected(t *testing.T) {
	for _, bad := range []string{"--upload-pack=x", "-1", "main branch", "main\n", strings.Repeat("a", 2000)} {
		if ValidBase(bad) == nil {
			t.Errorf("ValidBase(%.40q) = nil, want an error", bad)
		}
	}
	for _, ok := range []string{"", "main", "refs/tags/v1.2", "0123abcd", "release/2026"} {
		if err := ValidBase(ok); err != nil {
			t.Errorf("ValidBase(%q) = %v", ok, err)
		}
	}
}

var gitHelperRE = regexp.MustCompile(`^[A-Za-z0-9+.-]*::`)

// FuzzValidRepo: whatever ValidRepo accepts, git reads as a URL of one of its
// own transports, an ssh address or a path: never an option, a remote
// helper or a second line.
func FuzzValidRepo(f *testing.F) {
	for _, s := range []string{"https://h/r", "ext::sh", "git@h:r", "/srv/r", "-x", "ssh://-o/x", "fd::3", "a b", "file:///r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, repo string) {
		if ValidRepo(repo) != nil {
			return
		}
		switch {
		case strings.HasPrefix(repo, "-"):
			t.Fatalf("accepted %q: an option", repo)
		case gitHelperRE.MatchString(repo):
			t.Fatalf("accepted %q: a remote helper", repo)
		case strings.IndexFunc(repo, unicode.IsControl) >= 0:
			t.Fatalf("accepted %q: control characters", repo)
		}
		if kindOf(repo) == repoURL {
			scheme, _, _ := strings.Cut(repo, "://")
			if !slices.Contains(repoSchemes, strings.ToLower(scheme)) {
				t.Fatalf("accepted %q: scheme %q", repo, scheme)
			}
			if strings.ContainsFunc(repo, unicode.IsSpace) {
				t.Fatalf("accepted %q: whitespace in a URL", repo)
			}
		}
	})
}
