package sandbox

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
)

// InstallDirs lists the directories a binary needs to run, for reading and
// executing: the directory it is called by, the one it resolves to, the
// installation prefix when that is a bin directory (~/.bun for
// ~/.bun/bin/bun, an nvm node's version directory), the outermost
// node_modules above it (an npm package's native parts are sibling
// packages), and the same for the interpreter its first line names
// (#!/usr/bin/env node), looked up in path. Nothing is listed for a path
// that does not resolve.
func InstallDirs(exec string, path []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(d string) {
		if d != "" && d != "/" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	var visit func(bin string, depth int)
	visit = func(bin string, depth int) {
		if !filepath.IsAbs(bin) {
			return
		}
		add(filepath.Dir(bin))
		real, err := filepath.EvalSymlinks(bin)
		if err != nil {
			return
		}
		dir := filepath.Dir(real)
		add(dir)
		if filepath.Base(dir) == "bin" {
			add(filepath.Dir(dir))
		}
		if nm := outermost(real, "node_modules"); nm != "" {
			add(nm)
		}
		if depth == 0 {
			if interp := interpreter(real, path); interp != "" {
				visit(interp, depth+1)
			}
		}
	}
	visit(exec, 0)
	return out
}

// outermost returns the outermost ancestor of p named name, or "".
func outermost(p, name string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts[:len(parts)-1] {
		if part == name {
			return strings.Join(parts[:i+1], "/")
		}
	}
	return ""
}

// interpreter returns the absolute path of the program a script's #! line
// names, looking up the name `env` is given in path, or "".
func interpreter(script string, path []string) string {
	f, err := os.Open(script)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := f.Read(buf)
	line, ok := bytes.CutPrefix(buf[:n], []byte("#!"))
	if !ok {
		return ""
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) != "env" {
		return fields[0]
	}
	for _, f := range fields[1:] {
		if strings.HasPrefix(f, "-") || strings.Contains(f, "=") {
			continue // env's options (-S) and assignments
		}
		return lookPath(f, path)
	}
	return ""
}

// lookPath finds an executable name in the given search path.
func lookPath(name string, path []string) string {
	if strings.Contains(name, "/") {
		return name
	}
	for _, d := range path {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
