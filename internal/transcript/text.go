package transcript

import "github.com/drover-dev/drover/internal/drovertype"

// textRules reads plain output: any CLI without a structured format, or
// one run in its text mode. A run that exits 0 has no Failure (plain text
// cannot tell a fatal error from a retry the CLI got past: gemini prints
// "Attempt 1 failed with status 429" and then succeeds, docs/runtimes.md), so
// every row is a hint: it names the class of a run that exited non-zero.
// Patterns are the wordings the recorded CLIs use; conservative on purpose.
var textRules = []rule{
	// codex/fail-429/stdout.txt: "last status: 429 Too Many Requests" (text mode prints it as `ERROR:` on stderr)
	{in: fromText, text: re(`(?i)\b429 Too Many Requests\b`), implies: 429, class: drovertype.ClassRateLimited, retry: true, hint: true},
	// opencode/fail-429, pi/fail-429, copilot/fail-429: "Rate limit reached for requests"; claude/fail-429: "exceeded your per-minute rate limit"
	{in: fromText, text: re(`(?i)\brate limit (?:reached|exceeded)\b|\bexceeded your [\w-]* ?rate limit\b`), class: drovertype.ClassRateLimited, retry: true, hint: true},
	// gemini/fail-429: "Resource has been exhausted (e.g. check quota)"
	{in: fromText, text: re(`(?i)\bresource has been exhausted\b`), implies: 429, class: drovertype.ClassRateLimited, retry: true, hint: true},
	// docs/runtimes.md#quota-messages: claude "usage limit reached", "You've hit your session
	// limit"; codex "You've hit your usage limit"; copilot "you've hit a rate limit that
	// restricts the number of Copilot model requests"; gemini "Quota exceeded for quota metric"
	{in: fromText, text: re(`(?i)\busage limit reached\b|\bhit (?:a|your) (?:rate |usage |session |weekly )?limit\b|\bquota exceeded\b`),
		implies: 429, class: drovertype.ClassRateLimited, retry: true, hint: true},
	// codex/fail-401/stdout.txt: "unexpected status 401 Unauthorized"
	{in: fromText, text: re(`(?i)\b401 Unauthorized\b`), implies: 401, class: drovertype.ClassAuthFailed, hint: true},
	// claude/fail-401: "Invalid API key"; codex, opencode, kilo, pi fail-401: "Incorrect API key provided"; gemini/fail-401: "API key not valid"
	{in: fromText, text: re(`(?i)\b(?:invalid|incorrect) API key\b|\bAPI key not valid\b`), class: drovertype.ClassAuthFailed, hint: true},
	// copilot/fail-401/stdout.txt: "Authentication failed with provider at <URL> (HTTP 401)"
	{in: fromText, text: re(`(?i)\bauthentication failed\b`), class: drovertype.ClassAuthFailed, hint: true},
	// A failed exit with none of the above.
	{in: fromExit, class: drovertype.ClassRuntimeError},
}

var textSpec = &spec{
	format: drovertype.FormatText,
	rules:  textRules,
}
