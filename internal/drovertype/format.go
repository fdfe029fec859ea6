package drovertype

import (
	"errors"
	"fmt"
	"strings"
)

// OutputFormat names the structured output of a CLI run headless, which
// package transcript parses. docs/runtimes.md shows each shape.
type OutputFormat string

// The output formats Drover reads.
const (
	FormatClaudeStreamJSON OutputFormat = "claude-stream-json" // claude -p --output-format stream-json --verbose
	FormatCodexJSON        OutputFormat = "codex-json"         // codex exec --json
	FormatOpenCodeJSON     OutputFormat = "opencode-json"      // opencode run --format json, and kilo run --format json (same shape)
	FormatGeminiStreamJSON OutputFormat = "gemini-stream-json" // gemini -p ... --output-format stream-json
	FormatPiJSON           OutputFormat = "pi-json"            // pi -p ... --mode json
	FormatCopilotJSON      OutputFormat = "copilot-json"       // copilot -p ... --output-format json
	FormatText             OutputFormat = "text"               // anything else: lines kept as text
)

// OutputFormats lists the formats by their names, for messages.
var OutputFormats = []OutputFormat{FormatText, FormatClaudeStreamJSON, FormatCodexJSON,
	FormatOpenCodeJSON, FormatGeminiStreamJSON, FormatPiJSON, FormatCopilotJSON}

// formatAliases are the CLIs' names, accepted for their formats.
var formatAliases = map[string]OutputFormat{
	"claude": FormatClaudeStreamJSON, "codex": FormatCodexJSON,
	"opencode": FormatOpenCodeJSON, "kilo": FormatOpenCodeJSON, "kilo-json": FormatOpenCodeJSON,
	"gemini": FormatGeminiStreamJSON, "pi": FormatPiJSON, "copilot": FormatCopilotJSON,
}

// ErrUnknownFormat is returned by ParseOutputFormat for a name it does not know.
var ErrUnknownFormat = errors.New("unknown output format")

// ParseOutputFormat turns a configured name into a format: one of the
// names above or, for convenience, a CLI's name (claude, codex, opencode,
// kilo, gemini, pi, copilot), in any case. The empty string is FormatText.
func ParseOutputFormat(s string) (OutputFormat, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "" {
		return FormatText, nil
	}
	for _, f := range OutputFormats {
		if string(f) == name {
			return f, nil
		}
	}
	if f, ok := formatAliases[name]; ok {
		return f, nil
	}
	return "", fmt.Errorf("%w %q (known: %v, or a CLI's name)", ErrUnknownFormat, s, OutputFormats)
}
