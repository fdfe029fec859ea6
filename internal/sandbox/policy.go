package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Grant is a path a confined process may use: a directory with everything
// beneath it, or one file.
type Grant struct {
	Path string
	// Write allows creating, changing, renaming and removing; without it
	// the path may be read and its files executed.
	Write bool
}

// Policy is what one confined process may reach.
type Policy struct {
	// Own are the process's own paths — its worktree, TMPDIR and HOME, the
	// repository objects it reads — which Drover made for it: each must
	// exist, and each is granted as given even inside a denied directory
	// (they live in the worker's work dir).
	Own []Grant
	// Extra are paths the process needs from the host: from configuration,
	// the worker's HOME, ... They are granted unless they lie inside a
	// denied path; missing ones are skipped.
	Extra []Grant
	// Exec is the binary's absolute path: where it is installed is readable
	// (InstallDirs), as is the installation of the interpreter its first
	// line names.
	Exec string
	// PATH is the search path the process runs with: each absolute entry is
	// readable, so it can run what it finds there.
	PATH []string
	// Deny are paths no grant reaches: the worker's secrets. A granted
	// directory that holds one is granted entry by entry around it, down to
	// the denied path (sibling expansion), because Landlock can only add.
	Deny []string
	// Connect and Bind are the TCP ports the process may connect to and
	// listen on (0 in Bind: any port the kernel picks).
	Connect, Bind []uint16
}

// kind is how a rule grants a path.
type kind int

const (
	readDir   kind = iota + 1 // list, read and execute beneath
	writeDir                  // readDir plus create, change, rename, remove beneath
	readFile                  // read and execute one file
	writeFile                 // read and change one file
	device                    // read, write and ioctl on a device file (or beneath a device directory)
)

func (k kind) String() string {
	return [...]string{"", "read", "write", "read", "write", "device"}[k]
}

// rule is one Landlock path rule.
type rule struct {
	path string
	kind kind
}

// Confinement is a compiled Policy: the rules Wrap puts into a fresh
// Landlock ruleset for every process it starts.
type Confinement struct {
	sb       *Sandbox
	rules    []rule
	connect  []uint16
	bind     []uint16
	writable []string // the write rules' paths, for Writable
	readable []string
	deny     []string // the policy's Deny, resolved, for Denied
	dropped  []string // Extra grants inside a denied path, for Describe
}

// Compile resolves a Policy into rules: every path made absolute, cleaned
// and with symlinks resolved (a rule on a symlink would grant its target),
// grants inside denied paths dropped unless they are the process's own,
// granted directories holding a denied path expanded around it, and the
// system paths every process needs (systemGrants) added.
func (s *Sandbox) Compile(p Policy) (*Confinement, error) {
	deny, err := resolveDeny(p.Deny)
	if err != nil {
		return nil, err
	}
	c := &Confinement{sb: s, deny: deny}
	var grants []resolved
	for _, g := range p.Own {
		r, err := resolveGrant(g)
		if err != nil {
			return nil, fmt.Errorf("sandbox: own path %s: %w", g.Path, err)
		}
		grants = append(grants, r)
	}
	extra := append(systemGrants(), p.Extra...)
	if p.Exec != "" {
		for _, d := range InstallDirs(p.Exec, p.PATH) {
			extra = append(extra, Grant{Path: d})
		}
	}
	for _, d := range p.PATH {
		if filepath.IsAbs(d) {
			extra = append(extra, Grant{Path: d})
		}
	}
	for _, g := range extra {
		r, err := resolveGrant(g)
		if err != nil {
			continue // a path this host does not have
		}
		if d, ok := within(deny, r.path); ok {
			c.dropped = append(c.dropped, fmt.Sprintf("%s (inside %s)", g.Path, d))
			continue
		}
		grants = append(grants, r)
	}
	var rules []rule
	for _, g := range grants {
		if slices.Contains(deny, g.path) {
			c.dropped = append(c.dropped, g.path+" (denied)")
			continue
		}
		if !g.dir {
			rules = append(rules, rule{g.path, g.fileKind()})
			continue
		}
		below := under(deny, g.path)
		if len(below) == 0 {
			rules = append(rules, rule{g.path, g.dirKind()})
			continue
		}
		expanded, err := expand(g.path, below, g.dirKind(), g.fileKind())
		if err != nil {
			return nil, err
		}
		rules = append(rules, expanded...)
	}
	c.rules = merge(rules)
	for _, r := range c.rules {
		switch r.kind {
		case writeDir, writeFile, device:
			c.writable = append(c.writable, r.path)
		}
		c.readable = append(c.readable, r.path)
	}
	c.connect = ports(p.Connect)
	c.bind = ports(p.Bind)
	return c, nil
}

// resolved is a grant with its path resolved.
type resolved struct {
	path  string
	write bool
	dir   bool
	dev   bool // a device file, or /dev/pts
}

func (r resolved) dirKind() kind {
	switch {
	case r.dev:
		return device
	case r.write:
		return writeDir
	}
	return readDir
}

func (r resolved) fileKind() kind {
	switch {
	case r.dev:
		return device
	case r.write:
		return writeFile
	}
	return readFile
}

func resolveGrant(g Grant) (resolved, error) {
	if !filepath.IsAbs(g.Path) {
		return resolved{}, fmt.Errorf("sandbox: %q is not an absolute path", g.Path)
	}
	real, err := filepath.EvalSymlinks(filepath.Clean(g.Path))
	if err != nil {
		return resolved{}, err
	}
	info, err := os.Stat(real)
	if err != nil {
		return resolved{}, err
	}
	r := resolved{path: real, write: g.Write, dir: info.IsDir()}
	r.dev = info.Mode()&fs.ModeDevice != 0 || real == "/dev/pts"
	return r, nil
}

// resolveDeny makes denied paths absolute and resolves their symlinks, as
// far as they exist: a denied file that does not exist yet is denied where
// it would be.
func resolveDeny(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("sandbox: denied path %q is not absolute", p)
		}
		out = append(out, resolveExisting(filepath.Clean(p)))
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// resolveExisting resolves the symlinks of the longest existing prefix of p.
func resolveExisting(p string) string {
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	return filepath.Join(resolveExisting(parent), filepath.Base(p))
}

// inside reports whether p is dir or beneath it.
func inside(dir, p string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// within returns the first denied path p is in (or is).
func within(deny []string, p string) (string, bool) {
	for _, d := range deny {
		if inside(d, p) {
			return d, true
		}
	}
	return "", false
}

// under returns the denied paths strictly beneath dir.
func under(deny []string, dir string) []string {
	var out []string
	for _, d := range deny {
		if d != dir && inside(dir, d) {
			out = append(out, d)
		}
	}
	return out
}

// merge gives each path one rule with the widest of its kinds, and drops
// a rule beneath another that grants all it does: Landlock unions the
// rules on a path's ancestors, so it grants nothing more, and every rule
// costs each launch two system calls.
func merge(rules []rule) []rule {
	best := map[string]kind{}
	for _, r := range rules {
		if k, ok := best[r.path]; !ok || wider(r.kind, k) {
			best[r.path] = r.kind
		}
	}
	all := make([]rule, 0, len(best))
	for p, k := range best {
		all = append(all, rule{p, k})
	}
	// Sorted, an ancestor comes before what is beneath it.
	slices.SortFunc(all, func(a, b rule) int { return strings.Compare(a.path, b.path) })
	var out []rule
	for _, r := range all {
		if !slices.ContainsFunc(out, func(a rule) bool { return a.path != r.path && inside(a.path, r.path) && a.kind.covers(r.kind) }) {
			out = append(out, r)
		}
	}
	return out
}

// covers reports whether a rule of kind k on a directory grants all a rule
// of kind o beneath it would.
func (k kind) covers(o kind) bool {
	switch k {
	case writeDir:
		return o != device
	case readDir:
		return o == readDir || o == readFile
	}
	return false
}

// wider orders kinds of the same shape (a path is a directory or not).
func wider(a, b kind) bool {
	rank := map[kind]int{readDir: 1, readFile: 1, writeDir: 2, writeFile: 2, device: 3}
	return rank[a] > rank[b]
}

func ports(ps []uint16) []uint16 {
	out := slices.Clone(ps)
	slices.Sort(out)
	return slices.Compact(out)
}

// Writable reports whether the confined process may write path (which
// need not exist): whether a write rule covers it.
func (c *Confinement) Writable(path string) bool {
	return covered(c.writable, path)
}

// Readable reports whether a rule lets the process read path.
func (c *Confinement) Readable(path string) bool {
	return covered(c.readable, path)
}

func covered(roots []string, path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	p := resolveExisting(filepath.Clean(path))
	for _, r := range roots {
		if inside(r, p) {
			return true
		}
	}
	return false
}

// Denied reports whether path is one of the policy's Deny paths or lies
// beneath one: no grant reaches it.
func (c *Confinement) Denied(path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	_, ok := within(c.deny, resolveExisting(filepath.Clean(path)))
	return ok
}

// ConnectAllowed reports whether the process may connect to a TCP port.
func (c *Confinement) ConnectAllowed(port uint16) bool {
	_, ok := slices.BinarySearch(c.connect, port)
	return ok
}

// Describe lists the rules, one per line ("write /work/wt-1"), then the
// ports, then the grants dropped for lying in a denied path: what a
// confined process may reach, for logs and docs.
func (c *Confinement) Describe() []string {
	var out []string
	for _, r := range c.rules {
		out = append(out, r.kind.String()+" "+r.path)
	}
	for _, p := range c.connect {
		out = append(out, fmt.Sprintf("connect tcp/%d", p))
	}
	for _, p := range c.bind {
		out = append(out, fmt.Sprintf("bind tcp/%d", p))
	}
	for _, d := range c.dropped {
		out = append(out, "dropped "+d)
	}
	return out
}
