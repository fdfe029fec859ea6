package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// expand grants dir entry by entry, leaving out the denied paths beneath
// it: an entry that is denied is skipped, one that holds a denied path is
// expanded in turn, any other is granted whole (dk for a directory, fk for
// anything else). Symlinks are skipped: a rule on one would grant its
// target, and without a rule a symlink still resolves to wherever its
// target's own rules allow, as it did when dir was granted whole.
//
// What is created in an expanded directory after Compile is not granted;
// a denied path that does not exist yet stays denied when it is created.
func expand(dir string, deny []string, dk, fk kind) ([]rule, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox: expanding %s around a denied path: %w", dir, err)
	}
	var out []rule
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if slices.Contains(deny, p) || e.Type()&os.ModeSymlink != 0 {
			continue
		}
		if below := under(deny, p); len(below) > 0 {
			if !e.IsDir() {
				continue // a denied path beneath a file: nothing to grant there
			}
			sub, err := expand(p, below, dk, fk)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		if e.IsDir() {
			out = append(out, rule{p, dk})
		} else {
			out = append(out, rule{p, fk})
		}
	}
	return out, nil
}
