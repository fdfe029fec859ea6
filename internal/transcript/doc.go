// Package transcript reads what a coding-agent CLI prints when it runs
// headless and turns it into normalised events, token usage, the final
// answer, and — the part Drover's retries depend on — a classified Failure.
//
// # What it owns
//
//   - One decoder per structured output format (Format): claude stream-json,
//     codex exec --json, opencode/kilo --format json, gemini stream-json,
//     pi --mode json, copilot --output-format json, and plain Text.
//   - One classification table per format (the *Rules variables). Matching
//     a CLI's words is the job here, so the patterns live in those tables
//     and nowhere else; every row cites the recording under
//     testdata/transcripts or the fact of docs/runtimes.md it comes from,
//     and the recordings are the tests. docs/runtimes.md#error-classes
//     explains the tables.
//   - Bounds: a Parser's memory does not grow with the output (lines are cut
//     at MaxLine, the first and last KeepEvents events are kept, texts are
//     clipped, at most MaxFiles files and 1024 tool call ids are kept: a few
//     MiB at worst), because the output is untrusted input. Every decoder
//     is fuzzed (make fuzz).
//
// # What it must not know
//
// Processes, signals and timeouts (package supervise runs the CLI and knows
// whether Drover stopped it), NATS, Drover's events, retry policy, adapters.
// It never trusts the output for what changed in the worktree: Summary.Files
// is what the CLI says it wrote, informational only; git decides.
//
// # How a run is classified
//
// Summary(exitCode) decides in this order:
//
//  1. A fatal error in the structured output (claude result is_error or
//     permission_denials, codex turn.failed, opencode/kilo error, gemini
//     result status "error", pi stopReason "error" / auto_retry_end
//     success:false, copilot session.error or result exitCode ≠ 0). This
//     comes first because the exit code lies: pi exits 0 on 401 and 429.
//  2. A fatal plain-text line, on stderr or a stdout line that is not JSON
//     (gemini "Please set an Auth method", copilot "No authentication
//     information found", pi "No API key found", claude's root refusal).
//  3. Exit 0 is success only if the format's promised final line came
//     (claude/gemini/copilot "result", codex "turn.completed"/"turn.failed",
//     pi "agent_end"; opencode/kilo and Text promise none). Exit 0 without
//     it is RUNTIME_OUTPUT_MALFORMED, retryable: gemini exits 0 on SIGTERM
//     (docs/runtimes.md#gemini), so that is a run cut short, not a
//     success. If the CLI was retrying when it stopped, the latest retry
//     notice names the class instead (e.g. RATE_LIMITED).
//  4. A non-zero exit: rows keyed on the exit code (gemini 41, 145 = 401
//     mod 256, 173 = 429 mod 256, 55), else the latest retry notice
//     (claude api_retry, codex "Reconnecting...", pi auto_retry_start,
//     copilot model.call_failure, gemini "Attempt N failed"), else
//     RUNTIME_ERROR with the last stderr line.
//
// Text never fails a run that exited 0: in plain text a fatal error and a
// retry the CLI got past look alike.
//
// # While the CLI runs
//
// Verdict says what the output shows so far, so that a CLI retrying for
// minutes can be stopped (the caller decides when: adapter.StopOn): the
// structured fatal error (Retrying when the CLI goes on after it, as pi
// does after a failed message), else a fatal plain text line, else the
// latest retry notice (Retrying) unless the CLI made progress since — an
// answer, a tool call or its result, not an error. Plain text (Text) is
// never judged while it runs.
//
// RetryAfter is set only for retryable failures and only from what the
// output states: claude's latest api_retry retry_delay_ms (the wait the CLI
// itself computed: the server's Retry-After or its backoff), a Retry-After
// response header (opencode/kilo responseHeaders), or the server's "Please
// try again in 1s." (pi, opencode, kilo, copilot). Codex and gemini state
// none. Copilot's "total retry wait time" is time already spent, not a wait,
// and is not used. ResetAt is set from a Retry-After HTTP date, and both
// from the quota and usage-limit messages of each format's wait table
// (wait.go: claude's "usage limit reached|<unix time>" and "resets 3pm
// (Zone)", codex's "try again in 5 days …", gemini's RetryInfo, …), read
// with the parser's clock (NewParserWith) for a time of day.
package transcript
