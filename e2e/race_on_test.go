//go:build race

package e2e

// raceEnabled builds the binaries under test with the race detector when the
// tests themselves run with it, so races in the real processes fail too.
const raceEnabled = true
