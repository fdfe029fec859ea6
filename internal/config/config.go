package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"golang.org/x/crypto/bcrypt"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/flow"
	"github.com/drover-dev/drover/internal/readlimit"
	"github.com/drover-dev/drover/internal/tracing"
)

// ErrInvalid is wrapped by every configuration error.
var ErrInvalid = errors.New("config: invalid configuration")

// Config is everything a controller or worker process is configured with.
type Config struct {
	// DataDir holds the controller's Pebble store and the embedded
	// nats-server's files. Defaults to ~/.drover.
	DataDir string `mapstructure:"data_dir"`
	Log     Log    `mapstructure:"log"`
	NATS    NATS   `mapstructure:"nats"`
	Queue   Queue  `mapstructure:"queue"`
	Worker  Worker `mapstructure:"worker"`
	// Defaults apply where neither the flow nor its task says otherwise.
	Defaults Defaults `mapstructure:"defaults"`
	// Runtimes are the CLIs Drover can run, by name. Flows name them.
	Runtimes map[string]Runtime `mapstructure:"runtimes"`
	// Projects are named repos with their own defaults; a flow names one
	// with `project:`. Resolution: task > flow > project > defaults.
	Projects   map[string]Project `mapstructure:"projects"`
	Controller Controller         `mapstructure:"controller"`
	HTTP       HTTP               `mapstructure:"http"`
	// Console is the web console the controller serves under /ui/ on
	// http.listen (docs/console.md).
	Console Console `mapstructure:"console"`
	// Tracing exports OpenTelemetry spans (docs/operations.md#read-a-trace).
	Tracing tracing.Config `mapstructure:"tracing"`
	// InsecureListen lets the embedded nats-server listen beyond loopback
	// with no authentication, and http.pprof be served beyond loopback:
	// both are refused without it, and logged as a warning with it.
	// Defaults to false.
	InsecureListen bool `mapstructure:"insecure_listen"`
	// Cooldown tunes how the fleet waits out a provider's limit (limits.go).
	Cooldown Cooldown `mapstructure:"cooldown"`
	// Pricing estimates the cost of usage a CLI reports without one, for
	// budgets. Defaults to none: such usage costs nothing.
	Pricing []Price `mapstructure:"pricing"`
	// Forges are the code forges flows are published to, by a name of the
	// operator's choosing (forges.go, docs/forges.md). Defaults to none.
	Forges map[string]Forge `mapstructure:"forges"`

	// File is the configuration file Load read, "" for none; it is one of
	// the worker's secrets (SandboxDeny).
	File string `mapstructure:"-"`
}

// HTTP configures the metrics and health listener of the controller and
// worker daemons.
type HTTP struct {
	// Listen is the host:port serving /metrics, /healthz and /readyz;
	// empty (the default) serves nothing.
	Listen string `mapstructure:"listen"`
	// Pprof also serves Go's profiler under /debug/pprof/ on Listen, for
	// finding what limits a process (docs/benchmarks.md). It shows stacks
	// and memory to anyone who can reach Listen. Defaults to false.
	Pprof bool `mapstructure:"pprof"`
}

// Console configures the controller's web console. Its pages are served
// to anyone who reaches http.listen; its actions (cancel, retry, pause,
// resume) only to someone logged in with Token or as one of Users.
type Console struct {
	// Enabled serves the console under /ui/ on http.listen (nothing is
	// served when http.listen is empty). Defaults to true.
	Enabled bool `mapstructure:"enabled"`
	// Token logs in whoever presents it: at least 16 characters. Defaults
	// to none.
	Token Secret `mapstructure:"token"`
	// Users may log in with a name and a password, stored as a bcrypt
	// hash (`controller console hash-password`). Defaults to none.
	Users []ConsoleUser `mapstructure:"users"`
	// SessionTTL is how long a login lasts. Defaults to 12h.
	SessionTTL time.Duration `mapstructure:"session_ttl"`
	// SecureCookie marks the session cookie Secure even on plain HTTP, for
	// a console behind a proxy that terminates TLS; it is Secure anyway
	// when the request came over TLS. Defaults to false.
	SecureCookie bool `mapstructure:"secure_cookie"`
	// URL is where people reach the console (https://drover.example.com),
	// for links to a flow in the pull requests Drover opens; empty: no
	// link. Defaults to empty.
	URL string `mapstructure:"url"`
}

// ConsoleUser is one login of the console.
type ConsoleUser struct {
	Name string `mapstructure:"name"`
	// PasswordHash is the bcrypt hash of the user's password.
	PasswordHash Secret `mapstructure:"password_hash"`
}

// Controller tunes the controller's scheduling.
type Controller struct {
	// MaxParallel bounds the attempts scheduled or running at once across
	// all flows; 0 means no limit. Defaults to 0.
	MaxParallel int `mapstructure:"max_parallel"`
	// GCPercent is the Go garbage collector's target (GOGC) for the
	// controller's process, unless GOGC is set: 10..1000, default 50. The
	// controller's heap is mostly its projection, which lives as long as
	// the process, and Go's default of 100 lets the heap grow to twice it
	// before collecting (docs/benchmarks.md, scale).
	GCPercent int `mapstructure:"gc_percent"`
	// ID names this controller among the controllers sharing one NATS (an
	// id: letters, digits, '-'). Defaults to the id kept in the data dir's
	// controller-id file, made at the first start from the host name and
	// a random suffix.
	ID string `mapstructure:"id"`
	// LeaseTTL is how long the leader's lease lives unrenewed: the leader
	// renews it every third of it, and stops acting a tenth of it before it
	// could lapse; a standby takes over once it has lapsed (at once when
	// the leader resigns, stopping). 1s..1m, default 3s.
	LeaseTTL time.Duration `mapstructure:"lease_ttl"`
}

// Project is the project level of runtime resolution.
type Project struct {
	// Repo is used by flows that name the project and no repo.
	Repo string `mapstructure:"repo"`
	// Runtime, Model and Args choose the worker role's runtime.
	Runtime string   `mapstructure:"runtime"`
	Model   string   `mapstructure:"model"`
	Args    []string `mapstructure:"args"`
	// Validator and ValidatorModel choose the validator role's runtime.
	Validator      string `mapstructure:"validator"`
	ValidatorModel string `mapstructure:"validator_model"`
	// Review asks the validator to review every task of the project's flows.
	Review *bool `mapstructure:"review"`
	// Timeout of one attempt; 0 inherits.
	Timeout time.Duration `mapstructure:"timeout"`
	// PlacementTimeout is how long an attempt may wait while no live
	// worker serves its runtime; 0 inherits.
	PlacementTimeout time.Duration `mapstructure:"placement_timeout"`
	// MaxParallel bounds each flow's attempts at once; 0 inherits.
	MaxParallel int `mapstructure:"max_parallel"`
	// Retry is the project's retry policy; unset fields inherit.
	Retry Retry `mapstructure:"retry"`
	// Budget caps each flow of the project that sets none; unset inherits.
	Budget Budget `mapstructure:"budget"`
	// Publish is the project's publish section, as a flow writes it
	// (ProjectPublish reads it); a flow's fields override it one by one.
	Publish map[string]any `mapstructure:"publish"`
}

// Retry is a retry policy at one level of configuration. Zero fields are
// unset and inherit (internal/policy documents the built-in defaults).
type Retry struct {
	MaxAttempts    int           `mapstructure:"max_attempts"`
	InitialBackoff time.Duration `mapstructure:"initial_backoff"`
	Coefficient    float64       `mapstructure:"coefficient"`
	MaxBackoff     time.Duration `mapstructure:"max_backoff"`
	// Jitter is a pointer because 0 (no jitter) is a value.
	Jitter   *float64                `mapstructure:"jitter"`
	RetryOn  []drovertype.ErrorClass `mapstructure:"retry_on"`
	Fallback []string                `mapstructure:"fallback"`
	// RateLimitWait is how long a task may wait out rate limits before it
	// fails RATE_LIMITED.
	RateLimitWait time.Duration `mapstructure:"rate_limit_wait"`
}

// Spec returns r as a flow-level retry spec, with unset fields nil.
func (r Retry) Spec() *flow.RetrySpec {
	s := &flow.RetrySpec{Jitter: r.Jitter, RetryOn: r.RetryOn, Fallback: r.Fallback}
	if r.MaxAttempts != 0 {
		s.MaxAttempts = &r.MaxAttempts
	}
	if r.InitialBackoff != 0 {
		d := flow.Duration(r.InitialBackoff)
		s.InitialBackoff = &d
	}
	if r.Coefficient != 0 {
		s.Coefficient = &r.Coefficient
	}
	if r.MaxBackoff != 0 {
		d := flow.Duration(r.MaxBackoff)
		s.MaxBackoff = &d
	}
	if r.RateLimitWait != 0 {
		d := flow.Duration(r.RateLimitWait)
		s.RateLimitWait = &d
	}
	if s.MaxAttempts == nil && s.InitialBackoff == nil && s.Coefficient == nil && s.MaxBackoff == nil &&
		s.Jitter == nil && len(s.RetryOn) == 0 && len(s.Fallback) == 0 && s.RateLimitWait == nil {
		return nil
	}
	return s
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Defaults to info.
	Level string `mapstructure:"level"`
	// Format is text or json. Defaults to text.
	Format string `mapstructure:"format"`
}

// NATS says where JetStream is.
type NATS struct {
	// URL of an external NATS server. Empty means the controller embeds one
	// and clients find it through the data dir. Defaults to empty.
	URL string `mapstructure:"url"`
	// Listen is host:port of the embedded server; port -1 picks a free one.
	// Defaults to 127.0.0.1:4222.
	Listen string `mapstructure:"listen"`
	// Replicas of every stream: 1 for one server, 3 for a cluster. Defaults to 1.
	Replicas int `mapstructure:"replicas"`
	// DedupWindow is how long JetStream remembers the id of each event and
	// job it stored, to drop a republish of it; the fold drops what comes
	// later by the same id. The server holds every id of the window in
	// memory, about 150 bytes each. Defaults to 2m, JetStream's own.
	DedupWindow time.Duration `mapstructure:"dedup_window"`
	// SyncInterval is how often the embedded server fsyncs JetStream's
	// files: "always" (every write, before it is acknowledged), a duration,
	// or "default" for the nats-server default of 2 minutes, which can lose
	// acknowledged events, jobs and claims when the machine crashes or loses
	// power (Jepsen, NATS 2.12.1). Defaults to always (docs/design.md has
	// the measured cost).
	SyncInterval string `mapstructure:"sync_interval"`
	// ServerConfig is a nats-server configuration file for the embedded
	// server: authorization, accounts, TLS, cluster (see nats.go in this
	// package for what Drover sets over it). Defaults to none.
	ServerConfig string `mapstructure:"server_config"`
	// How every process authenticates to NATS and sets up TLS: at most one
	// of User/Password, Token, NKeyFile, CredsFile. Default to none.
	User      string  `mapstructure:"user"`
	Password  Secret  `mapstructure:"password"`
	Token     Secret  `mapstructure:"token"`
	NKeyFile  string  `mapstructure:"nkey_file"`
	CredsFile string  `mapstructure:"creds_file"`
	TLS       NATSTLS `mapstructure:"tls"`
}

// Queue tunes job delivery.
type Queue struct {
	// AckWait is how long a job may go without a heartbeat before it is
	// redelivered, and how long a claim lease lasts. Defaults to 30s.
	AckWait time.Duration `mapstructure:"ack_wait"`
	// Heartbeat is how often a worker renews what it holds. Defaults to AckWait/3.
	Heartbeat time.Duration `mapstructure:"heartbeat"`
}

// Worker configures a worker process.
type Worker struct {
	// ID names this worker in events. Defaults to hostname-pid.
	ID string `mapstructure:"id"`
	// Pool is the set of workers a job is queued for. Defaults to "default".
	Pool string `mapstructure:"pool"`
	// Slots is how many attempts run at once. Defaults to 2.
	Slots int `mapstructure:"slots"`
	// WorkDir holds the repo caches and worktrees. Defaults to DataDir/worker.
	WorkDir string `mapstructure:"work_dir"`
	// Runtimes this worker serves. Defaults to every configured runtime.
	Runtimes []string `mapstructure:"runtimes"`
	// HealthInterval is how often the worker re-checks its runtimes and renews
	// its registration. Defaults to 30s.
	HealthInterval time.Duration `mapstructure:"health_interval"`
	// KeepWorktrees keeps every finished worktree on disk, for debugging;
	// nothing removes them. Defaults to false.
	KeepWorktrees bool `mapstructure:"keep_worktrees"`
	// KeepFailedWorktrees is how long the worktree of a failed attempt stays
	// on disk for inspection before it is swept; 0 removes it at once.
	// Kept worktrees are swept early, oldest first, when free disk runs
	// below MinFreeDisk. Defaults to 24h.
	KeepFailedWorktrees time.Duration `mapstructure:"keep_failed_worktrees"`
	// ReuseWorktrees keeps the checkouts of succeeded attempts, up to one
	// per slot, for later attempts on the same repository to start from
	// instead of checking out every file anew. Defaults to true.
	ReuseWorktrees bool `mapstructure:"reuse_worktrees"`
	// MinFreeDisk is the free space the work dir's filesystem must have for
	// the worker to claim attempts, as bytes or a size like "2GiB"; below
	// it the worker stops claiming, says so in its log, registration and
	// /readyz, and resumes once space is freed. 0 disables the check.
	// Defaults to 1GiB.
	MinFreeDisk ByteSize `mapstructure:"min_free_disk"`
	// DrainTimeout is how long a worker told to stop (SIGTERM) lets its
	// running attempts finish before it hands them back for another
	// worker; it claims nothing new meanwhile. A second SIGTERM hands back
	// at once. Defaults to 30s.
	DrainTimeout time.Duration `mapstructure:"drain_timeout"`
	// Sandbox confines every CLI, verification command and validator the
	// worker runs (docs/security.md): on, or off to run them with the
	// worker's own access, which every attempt's report then shows. With
	// it on, a host whose kernel cannot confine claims nothing. Defaults
	// to on.
	Sandbox string `mapstructure:"sandbox"`
}

// Defaults are the global level of runtime resolution.
type Defaults struct {
	// Runtime used when a flow names none. Defaults to empty.
	Runtime string `mapstructure:"runtime"`
	// Timeout of one attempt's CLI run. Defaults to 30m.
	Timeout time.Duration `mapstructure:"timeout"`
	// PlacementTimeout is how long an attempt may wait while no live
	// worker serves its runtime in its pool before it ends NO_WORKER
	// (docs/flows.md#placement): 1s..720h, or 0 for the built-in 10m.
	// Defaults to 0.
	PlacementTimeout time.Duration `mapstructure:"placement_timeout"`
	// Pool jobs are queued for. Defaults to "default".
	Pool string `mapstructure:"pool"`
	// Validator is the runtime that reviews tasks when a flow asks for a
	// review and names no validator. Defaults to empty.
	Validator string `mapstructure:"validator"`
	// MaxParallel bounds each flow's attempts at once; 0 means no limit.
	// Defaults to 0.
	MaxParallel int `mapstructure:"max_parallel"`
	// Retry is the global retry policy; unset fields take the built-in
	// defaults (docs/flows.md).
	Retry Retry `mapstructure:"retry"`
	// Budget caps every flow that sets none and whose project sets none.
	// Defaults to none.
	Budget Budget `mapstructure:"budget"`
}

// Runtime describes one CLI: how to find it, start it and feed it.
type Runtime struct {
	// Adapter implements the runtime. Defaults to "command".
	Adapter string `mapstructure:"adapter"`
	// Binary is a name looked up in PATH (and beside the Drover binary), or a path.
	Binary string `mapstructure:"binary"`
	// Args come before the prompt.
	Args []string `mapstructure:"args"`
	// Input is how the prompt is delivered: stdin, arg or file. Defaults to stdin.
	Input string `mapstructure:"input"`
	// PromptFlag, for input arg or file, is put before the prompt or its path.
	PromptFlag string `mapstructure:"prompt_flag"`
	// EnvPassthrough names the worker's environment variables the CLI may
	// see (besides the base list: PATH, HOME, LANG, …). Configuring it
	// replaces a built-in runtime's list; EnvPassthroughAdd extends it.
	EnvPassthrough []string `mapstructure:"env_passthrough"`
	// EnvPassthroughAdd names more of the worker's variables the CLI may
	// see, after EnvPassthrough: a built-in runtime's list extended
	// without repeating it. Defaults to none.
	EnvPassthroughAdd []string `mapstructure:"env_passthrough_add"`
	// ProviderConfig is the CLI whose own provider configuration Drover
	// reads, in the files the CLI reads (the staged home_files, or where
	// a variable it sees points), for the variables it names as holding
	// keys, which it passes through, and the model endpoints it names,
	// whose ports the sandbox opens: codex (config.toml
	// model_providers.*.env_key and base_url), pi (models.json apiKey and
	// baseUrl), opencode or kilo ({env:NAME}, options.baseURL); a file the
	// CLI's sandbox lets it write names neither. none turns a built-in's
	// off. Defaults to none; the built-ins of those CLIs set their own.
	ProviderConfig string `mapstructure:"provider_config"`
	// Env sets fixed variables for the CLI, as NAME=value entries (a list,
	// because configuration keys are case-insensitive and names are not).
	Env []string `mapstructure:"env"`
	// Timeout of one run. Defaults to Defaults.Timeout.
	Timeout time.Duration `mapstructure:"timeout"`
	// Grace between SIGTERM and SIGKILL. Defaults to 5s.
	Grace time.Duration `mapstructure:"grace"`
	// NoOutputTimeout ends a run that prints nothing for this long. Defaults to 0, off.
	NoOutputTimeout time.Duration `mapstructure:"no_output_timeout"`
	// OwnRetryTimeout is how long the CLI may go on retrying a rate limit
	// or refused credentials on its own, by its output's retry notices,
	// before Drover stops it and reports RATE_LIMITED or AUTH_FAILED, so
	// that the task's fallback acts at once rather than after the CLI's
	// minutes of retries. Either one the CLI gave up on stops it at once.
	// Only structured output formats are watched for those; a CLI stuck on
	// what its sandbox refuses (the same port or path refused again, with
	// nothing done in between) is stopped after as long, whatever its
	// format, and reports SANDBOX_DENIED. Defaults to 15s.
	OwnRetryTimeout time.Duration `mapstructure:"own_retry_timeout"`
	// MaxOutputSize is the bytes of each stream kept for the report. Defaults to 1 MiB.
	MaxOutputSize int64 `mapstructure:"max_output_size"`
	// VersionArgs print the CLI's version for the health check. Defaults to ["--version"].
	VersionArgs []string `mapstructure:"version_args"`
	// MinVersion is the lowest version (dotted numbers, e.g. "2.1.0") the
	// runtime is healthy with; compared with the first such number the
	// version check prints. Defaults to none.
	MinVersion string `mapstructure:"min_version"`
	// Model is passed with ModelFlag when set. Defaults to the CLI's own choice.
	Model string `mapstructure:"model"`
	// Home is "worker" (the CLI sees the worker's HOME) or "isolated" (a fresh
	// HOME per attempt, into which HomeFiles are copied). Defaults to
	// isolated with worker.sandbox on (a confined CLI writes only its own
	// HOME), worker with it off.
	Home string `mapstructure:"home"`
	// HomeFiles are files or directories, relative to the worker's HOME, that
	// an isolated HOME needs — a CLI's login or settings, e.g.
	// ".claude/.credentials.json". Missing ones are skipped.
	HomeFiles []string `mapstructure:"home_files"`
	// Limits are resource limits for the CLI process. Defaults to none.
	Limits Limits `mapstructure:"limits"`
	// Models lists the models this runtime offers, for capabilities. Optional.
	Models []string `mapstructure:"models"`
	// ModelFlag is the CLI's flag that selects a model, e.g. "--model".
	ModelFlag string `mapstructure:"model_flag"`
	// Output is the format of the CLI's stdout, which picks the parser that
	// reads usage and errors from it: text, claude-stream-json, codex-json,
	// opencode-json, gemini-stream-json, pi-json or copilot-json. Defaults to text.
	Output drovertype.OutputFormat `mapstructure:"output"`
	// NativeRuntime holds the fields of `adapter: native` (native.go).
	NativeRuntime `mapstructure:",squash"`
	// Sandbox is what the CLI may reach beyond an attempt's own paths,
	// when worker.sandbox is on. Defaults to none (443 to connect to, for
	// the built-in CLIs).
	Sandbox RuntimeSandbox `mapstructure:"sandbox"`
}

// DefaultOwnRetryTimeout is Runtime.OwnRetryTimeout's default: long enough
// for a CLI to get past a transient 429 (a Retry-After of a few seconds),
// short enough that a rate-limited attempt ends within 30 s with the
// runtime's grace (docs/runtimes.md#their-own-retries).
const DefaultOwnRetryTimeout = 15 * time.Second

// Limits are resource limits for a CLI; 0 leaves one unset.
type Limits struct {
	// CPUSeconds of CPU time (RLIMIT_CPU).
	CPUSeconds uint64 `mapstructure:"cpu_seconds"`
	// AddressSpace in bytes (RLIMIT_AS). Node-based CLIs reserve a lot of
	// virtual memory: set it generously.
	AddressSpace uint64 `mapstructure:"address_space"`
	// OpenFiles (RLIMIT_NOFILE).
	OpenFiles uint64 `mapstructure:"open_files"`
	// FileSize in bytes, the largest file the CLI may write (RLIMIT_FSIZE).
	FileSize uint64 `mapstructure:"file_size"`
}

// The bounds of the numbers in the configuration, each reported with its
// key when a value is outside (docs/config.md lists them).
const (
	MaxSlots              = 1024               // worker.slots: attempts one worker runs at once
	MaxFlowParallel       = 10_000             // defaults/projects max_parallel: one flow's attempts at once (flow.MaxTasks bounds a flow's tasks)
	MaxControllerParallel = 100_000            // controller.max_parallel: attempts at once across all flows
	MaxAttempts           = 100                // retry.max_attempts, as in flows
	MaxCoefficient        = 100                // retry.coefficient, as in flows
	MaxTimeout            = 7 * 24 * time.Hour // attempt timeouts, grace, no-output timeouts
	MaxAckWait            = time.Hour          // queue.ack_wait: how long a lost worker goes unnoticed
	MaxDedupWindow        = 24 * time.Hour     // nats.dedup_window: the server keeps each id of it in memory
	MaxDrainTimeout       = 24 * time.Hour     // worker.drain_timeout
	MaxOutputSize         = 64 << 20           // runtimes.*.max_output_size: bytes of each stream a worker keeps in memory per attempt
	MaxOpenFiles          = 1 << 20            // runtimes.*.limits.open_files: Linux's default fs.nr_open
	MinAddressSpace       = 64 << 20           // runtimes.*.limits.address_space, when set: below it no CLI starts
	MinFileSize           = 1 << 20            // runtimes.*.limits.file_size, when set
)

// FlagBindings maps config keys to the flag names every Drover command uses
// for them, so that one spelling holds everywhere.
var FlagBindings = map[string]string{
	"data_dir":             "data-dir",
	"nats.url":             "nats-url",
	"nats.listen":          "nats-listen",
	"log.level":            "log-level",
	"log.format":           "log-format",
	"worker.id":            "id",
	"worker.pool":          "pool",
	"worker.slots":         "slots",
	"worker.work_dir":      "work-dir",
	"worker.runtimes":      "runtimes",
	"worker.drain_timeout": "drain-timeout",
	"http.listen":          "http-listen", // controller serve, controller dev and worker run
	"insecure_listen":      "insecure-listen",
}

// LoadOptions says where configuration comes from.
type LoadOptions struct {
	// File is a YAML config file; empty means $DROVER_CONFIG, or none.
	File string
	// Flags are the command's flags; Bind maps config keys to flag names.
	Flags *pflag.FlagSet
	Bind  map[string]string
}

// defaults lists every scalar key with its default, so that a DROVER_*
// variable is recognised for each of them.
func defaults() map[string]any {
	return map[string]any{
		"data_dir":                       "",
		"log.level":                      "info",
		"log.format":                     "text",
		"nats.url":                       "",
		"nats.listen":                    "127.0.0.1:4222",
		"nats.replicas":                  1,
		"nats.dedup_window":              2 * time.Minute,
		"nats.sync_interval":             "always",
		"queue.ack_wait":                 30 * time.Second,
		"queue.heartbeat":                time.Duration(0),
		"worker.id":                      "",
		"worker.pool":                    "default",
		"worker.slots":                   2,
		"worker.work_dir":                "",
		"worker.runtimes":                []string{},
		"worker.keep_worktrees":          false,
		"worker.keep_failed_worktrees":   24 * time.Hour,
		"worker.reuse_worktrees":         true,
		"worker.min_free_disk":           "1GiB",
		"worker.drain_timeout":           30 * time.Second,
		"worker.health_interval":         30 * time.Second,
		"worker.sandbox":                 SandboxOn,
		"defaults.runtime":               "",
		"defaults.timeout":               30 * time.Minute,
		"defaults.pool":                  "default",
		"defaults.validator":             "",
		"defaults.max_parallel":          0,
		"defaults.retry.max_attempts":    0,
		"defaults.retry.initial_backoff": time.Duration(0),
		"defaults.retry.coefficient":     0.0,
		"defaults.retry.max_backoff":     time.Duration(0),
		"defaults.retry.rate_limit_wait": time.Duration(0),
		"defaults.placement_timeout":     time.Duration(0),
		"controller.max_parallel":        0,
		"controller.gc_percent":          50,
		"controller.id":                  "",
		"controller.lease_ttl":           3 * time.Second,
		"http.listen":                    "",
		"http.pprof":                     false,
		"console.enabled":                true,
		"console.token":                  "",
		"console.session_ttl":            12 * time.Hour,
		"console.secure_cookie":          false,
		"console.url":                    "",
		"tracing.exporter":               "",
		"tracing.protocol":               "",
		"tracing.endpoint":               "",
		"tracing.sample_ratio":           1.0,
		"tracing.service_name":           "",
		"tracing.shutdown_timeout":       time.Duration(0),
		"insecure_listen":                false,
		"cooldown.default":               time.Minute,
		"cooldown.max":                   24 * time.Hour,
		"cooldown.coefficient":           2.0,
		"defaults.budget.tokens":         int64(0),
		"defaults.budget.cost_usd":       0.0,
		"defaults.budget.running":        "",
	}
}

// runtimeFields are the fields a DROVER_RUNTIMES_<NAME>_<FIELD> variable
// may set, longest first so that a suffix match picks the whole field name.
var runtimeFields = func() []string {
	f := []string{"adapter", "binary", "args", "input", "prompt_flag", "env_passthrough",
		"env", "timeout", "grace", "no_output_timeout", "max_output_size", "version_args", "model", "models", "model_flag", "output", "home", "home_files", "min_version",
		"provider", "base_url", "api_key_env", "max_tokens", "max_retries", "command_timeout",
		"env_passthrough_add", "provider_config", "own_retry_timeout",
		"sandbox_read", "sandbox_write", "sandbox_connect", "sandbox_bind"}
	sort.Slice(f, func(i, j int) bool { return len(f[i]) > len(f[j]) })
	return f
}()

// Load reads, merges, defaults and validates the configuration. Precedence:
// flags, then DROVER_* variables (DROVER_WORKER_SLOTS for worker.slots,
// DROVER_RUNTIMES_<NAME>_<FIELD> for runtime fields), then the file, then
// defaults.
func Load(o LoadOptions) (*Config, error) {
	v := viper.New()
	for k, d := range defaults() {
		v.SetDefault(k, d)
	}
	for k, d := range natsDefaults() {
		v.SetDefault(k, d)
	}
	v.SetEnvPrefix("DROVER")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()
	// Runtime entries may come from the environment alone; viper only sees
	// keys it knows, so bind the ones present.
	envBound := map[string]string{}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if rt, field, ok := runtimeVar(name); ok {
			// sandbox_read is the key sandbox.read.
			key := "runtimes." + rt + "." + strings.Replace(field, "sandbox_", "sandbox.", 1)
			_ = v.BindEnv(key, name)
			envBound[key] = name
		}
	}
	file := o.File
	if file == "" {
		file = os.Getenv("DROVER_CONFIG")
	}
	if file != "" {
		// Read here, bounded: viper would read a FIFO or /dev/zero forever.
		b, err := readlimit.File(file, maxSmallFile)
		if err != nil {
			return nil, fmt.Errorf("%w: config file %v", ErrInvalid, err)
		}
		v.SetConfigType("yaml")
		if err := v.ReadConfig(bytes.NewReader(b)); err != nil {
			return nil, fmt.Errorf("%w: read %s: %v", ErrInvalid, file, err)
		}
	}
	if o.Flags != nil {
		for key, flagName := range o.Bind {
			if f := o.Flags.Lookup(flagName); f != nil {
				if err := v.BindPFlag(key, f); err != nil {
					return nil, fmt.Errorf("config: bind flag --%s: %w", flagName, err)
				}
			}
		}
	}
	if errs := checkValues(v, sources{file: file, flags: o.Flags, bind: o.Bind, env: envBound}); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var c Config
	if err := v.Unmarshal(&c, func(dc *mapstructure.DecoderConfig) {
		dc.ErrorUnused = true
		dc.DecodeHook = mapstructure.ComposeDecodeHookFunc(byteSizeHook, dc.DecodeHook)
	}); err != nil {
		where := "environment or flags"
		if file != "" {
			where = file
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, where, err)
	}
	if file != "" {
		c.File, _ = filepath.Abs(file)
	}
	c.WithDefaults()
	errs := []error{c.Validate()}
	errs = append(errs, checkEnv(os.Environ(), &c)...)
	errs = append(errs, checkFiles(&c)...)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &c, nil
}

// checkFiles refuses configured files that are not regular files of a
// sane size: nats-server and nats.go read them whole, and a FIFO or a
// device there would hang or exhaust the process. A missing file is left
// to the NATS checks (internal/natsconn), which name it.
func checkFiles(c *Config) []error {
	var errs []error
	for _, f := range []struct{ key, path string }{
		{"nats.server_config", c.NATS.ServerConfig}, {"nats.nkey_file", c.NATS.NKeyFile},
		{"nats.creds_file", c.NATS.CredsFile}, {"nats.tls.ca_file", c.NATS.TLS.CAFile},
		{"nats.tls.cert_file", c.NATS.TLS.CertFile}, {"nats.tls.key_file", c.NATS.TLS.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		if err := readlimit.Check(f.path, maxSmallFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%w: %s: %v", ErrInvalid, f.key, err))
		}
	}
	return errs
}

// DefaultDataDir is data_dir's default: ~/.drover, made absolute.
func DefaultDataDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	dir := filepath.Join(home, ".drover")
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return dir
}

// WithDefaults fills what is derived from other fields.
func (c *Config) WithDefaults() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir()
	}
	if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	if c.Worker.WorkDir == "" {
		c.Worker.WorkDir = filepath.Join(c.DataDir, "worker")
	}
	if abs, err := filepath.Abs(c.Worker.WorkDir); err == nil {
		c.Worker.WorkDir = abs
	}
	c.Worker.Sandbox = normaliseSandbox(c.Worker.Sandbox)
	if c.Worker.ID == "" {
		host, _ := os.Hostname()
		c.Worker.ID = SanitizeID(fmt.Sprintf("%s-%d", host, os.Getpid()))
	}
	if c.Queue.Heartbeat == 0 {
		c.Queue.Heartbeat = c.Queue.AckWait / 3
	}
	if c.Console.SessionTTL == 0 {
		c.Console.SessionTTL = 12 * time.Hour
	}
	if c.Runtimes == nil {
		c.Runtimes = map[string]Runtime{}
	}
	// A configured runtime named like a built-in overrides its fields.
	for name, rt := range withBuiltinSandboxes(builtinRuntimes()) {
		c.Runtimes[name] = overlay(rt, c.Runtimes[name])
	}
	for name, rt := range c.Runtimes {
		if rt.Adapter == "" {
			rt.Adapter = "command"
		}
		if rt.Input == "" {
			rt.Input = "stdin"
		}
		if rt.Timeout == 0 {
			rt.Timeout = c.Defaults.Timeout
		}
		if rt.Grace == 0 {
			rt.Grace = 5 * time.Second
		}
		if rt.OwnRetryTimeout == 0 {
			rt.OwnRetryTimeout = DefaultOwnRetryTimeout
		}
		if rt.MaxOutputSize == 0 {
			rt.MaxOutputSize = 1 << 20
		}
		if rt.VersionArgs == nil {
			rt.VersionArgs = []string{"--version"}
		}
		if rt.Home == "" {
			// A confined CLI may write only its own HOME: one per attempt.
			rt.Home = "worker"
			if c.Worker.Sandbox != SandboxOff {
				rt.Home = "isolated"
			}
		}
		// A CLI's name is accepted for its format; an unknown one stays
		// as written for Validate to name.
		if f, err := drovertype.ParseOutputFormat(string(rt.Output)); err == nil {
			rt.Output = f
		}
		if rt.Adapter == "native" {
			nativeDefaults(&rt)
		}
		c.Runtimes[name] = rt
	}
	if len(c.Worker.Runtimes) == 0 {
		c.Worker.Runtimes = c.RuntimeNames()
	}
}

// RuntimeNames returns the configured runtime names, sorted.
func (c *Config) RuntimeNames() []string {
	names := make([]string, 0, len(c.Runtimes))
	for n := range c.Runtimes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Validate checks every field and names the bad one by its key.
func (c *Config) Validate() error {
	var p problems
	c.validateLog(&p)
	c.validateHTTP(&p)
	c.validateNATS(&p)
	c.validateQueue(&p)
	c.validateWorker(&p)
	c.validateIDs(&p)
	c.validateDefaults(&p)
	c.validateController(&p)
	c.validateRetry("defaults.retry", c.Defaults.Retry, &p)
	c.validateConsole(p.add)
	c.validateSandbox(p.add)
	validateTracing(c.Tracing, &p)
	c.validateProjects(&p)
	c.validateRuntimes(&p)
	c.validateLimits(&p)
	c.validateForges(&p)
	return errors.Join(p...)
}

// problems collects what Validate finds, each naming its key.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%w: %s: %s", ErrInvalid, key, fmt.Sprintf(format, args...)))
}

func (c *Config) validateLog(p *problems) {
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		p.add("log.level", "must be debug, info, warn or error (got %q)", c.Log.Level)
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		p.add("log.format", "must be text or json (got %q)", c.Log.Format)
	}
}

func (c *Config) validateHTTP(p *problems) {
	if c.HTTP.Listen == "" {
		return
	}
	if host, port, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
		p.add("http.listen", "must be host:port (got %q)", c.HTTP.Listen)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.add("http.listen", "port must be 0..65535 (got %q)", port)
	} else if c.HTTP.Pprof && !Loopback(host) && !c.InsecureListen {
		p.add("http.listen", "%s takes connections from other hosts and http.pprof is on: it would show the process's stacks and memory "+
			"to anyone who reaches it; listen on 127.0.0.1, turn http.pprof off, or set insecure_listen (--insecure-listen) to serve it on purpose", c.HTTP.Listen)
	}
}

func (c *Config) validateNATS(p *problems) {
	if c.NATS.URL == "" {
		if _, port, err := net.SplitHostPort(c.NATS.Listen); err != nil {
			p.add("nats.listen", "must be host:port (got %q)", c.NATS.Listen)
		} else if n, err := strconv.Atoi(port); err != nil || n < -1 || n > 65535 {
			p.add("nats.listen", "port must be -1..65535 (got %q)", port)
		}
	} else if !strings.Contains(c.NATS.URL, "://") {
		p.add("nats.url", "must be a URL like nats://host:4222 (got %q)", c.NATS.URL)
	}
	if c.NATS.Replicas < 1 || c.NATS.Replicas > 5 {
		p.add("nats.replicas", "must be 1..5 (got %d)", c.NATS.Replicas)
	}
	if w := c.NATS.DedupWindow; w < time.Second || w > MaxDedupWindow {
		p.add("nats.dedup_window", "must be 1s..%s (got %s)", MaxDedupWindow, w)
	}
	if s := c.NATS.SyncInterval; s != "always" && s != "default" {
		if d, err := time.ParseDuration(s); err != nil || d <= 0 {
			p.add("nats.sync_interval", "must be always, default or a positive duration (got %q)", s)
		}
	}
}

func (c *Config) validateQueue(p *problems) {
	if c.Queue.AckWait < time.Second || c.Queue.AckWait > MaxAckWait {
		p.add("queue.ack_wait", "must be 1s..%s (got %s)", MaxAckWait, c.Queue.AckWait)
	}
	if c.Queue.Heartbeat <= 0 || c.Queue.Heartbeat >= c.Queue.AckWait {
		p.add("queue.heartbeat", "must be positive and below queue.ack_wait (got %s)", c.Queue.Heartbeat)
	}
}

func (c *Config) validateWorker(p *problems) {
	w := &c.Worker
	if w.HealthInterval < time.Second || w.HealthInterval > time.Minute {
		p.add("worker.health_interval", "must be 1s..1m, inside the registration TTL (got %s)", w.HealthInterval)
	}
	if w.KeepFailedWorktrees < 0 {
		p.add("worker.keep_failed_worktrees", "must not be negative (got %s)", w.KeepFailedWorktrees)
	}
	if w.MinFreeDisk < 0 {
		p.add("worker.min_free_disk", "must not be negative (got %d)", w.MinFreeDisk)
	}
	if w.DrainTimeout < 0 || w.DrainTimeout > MaxDrainTimeout {
		p.add("worker.drain_timeout", "must be 0..%s (got %s)", MaxDrainTimeout, w.DrainTimeout)
	}
	if w.Slots < 1 || w.Slots > MaxSlots {
		p.add("worker.slots", "must be 1..%d (got %d)", MaxSlots, w.Slots)
	}
}

// validateIDs checks the names that go into subjects and registry keys.
func (c *Config) validateIDs(p *problems) {
	for _, id := range []struct{ key, v string }{
		{"worker.pool", c.Worker.Pool}, {"defaults.pool", c.Defaults.Pool}, {"worker.id", c.Worker.ID},
	} {
		if err := drovertype.ValidID(id.v); err != nil {
			p.add(id.key, "%v", err)
		}
	}
}

func (c *Config) validateDefaults(p *problems) {
	d := &c.Defaults
	if d.Timeout <= 0 || d.Timeout > MaxTimeout {
		p.add("defaults.timeout", "must be above 0 and at most %s (got %s)", MaxTimeout, d.Timeout)
	}
	c.checkRuntime(p, "defaults.runtime", d.Runtime)
	c.checkRuntime(p, "defaults.validator", d.Validator)
	if d.MaxParallel < 0 || d.MaxParallel > MaxFlowParallel {
		p.add("defaults.max_parallel", "must be 0..%d (got %d)", MaxFlowParallel, d.MaxParallel)
	}
	checkWait(p, "defaults.placement_timeout", d.PlacementTimeout)
}

// checkWait checks a wait a flow may also set (placement_timeout,
// retry.rate_limit_wait): 0 inherits, else as a flow's.
func checkWait(p *problems, key string, d time.Duration) {
	if d != 0 && (d < time.Second || d > time.Duration(flow.MaxWait)) {
		p.add(key, "must be 1s..%s, or 0 to inherit (got %s)", flow.MaxWait, d)
	}
}

// checkRuntime checks that name, when set, is a configured runtime.
func (c *Config) checkRuntime(p *problems, key, name string) {
	if _, ok := c.Runtimes[name]; name != "" && !ok {
		p.add(key, "unknown runtime %q (configured: %s)", name, strings.Join(c.RuntimeNames(), ", "))
	}
}

func (c *Config) validateController(p *problems) {
	if c.Controller.MaxParallel < 0 || c.Controller.MaxParallel > MaxControllerParallel {
		p.add("controller.max_parallel", "must be 0..%d (got %d)", MaxControllerParallel, c.Controller.MaxParallel)
	}
	if c.Controller.GCPercent < 10 || c.Controller.GCPercent > 1000 {
		p.add("controller.gc_percent", "must be 10..1000 (got %d)", c.Controller.GCPercent)
	}
	if c.Controller.LeaseTTL < time.Second || c.Controller.LeaseTTL > time.Minute {
		p.add("controller.lease_ttl", "must be 1s..1m (got %s): the NATS server counts a lease's TTL in whole seconds", c.Controller.LeaseTTL)
	}
	if c.Controller.ID != "" {
		if err := drovertype.ValidID(c.Controller.ID); err != nil {
			p.add("controller.id", "%v", err)
		}
	}
}

func (c *Config) validateProjects(p *problems) {
	for _, name := range c.ProjectNames() {
		pr, key := c.Projects[name], "projects."+name
		if err := drovertype.ValidID(name); err != nil {
			p.add(key, "project name: %v", err)
		}
		for k, rt := range map[string]string{"runtime": pr.Runtime, "validator": pr.Validator} {
			c.checkRuntime(p, key+"."+k, rt)
		}
		checkModel(p, key+".model", pr.Model)
		checkModel(p, key+".validator_model", pr.ValidatorModel)
		if pr.Timeout < 0 || pr.Timeout > MaxTimeout {
			p.add(key+".timeout", "must be 0..%s (got %s)", MaxTimeout, pr.Timeout)
		}
		if pr.MaxParallel < 0 || pr.MaxParallel > MaxFlowParallel {
			p.add(key+".max_parallel", "must be 0..%d (got %d)", MaxFlowParallel, pr.MaxParallel)
		}
		checkWait(p, key+".placement_timeout", pr.PlacementTimeout)
		if len(pr.Args) > flow.MaxArgs {
			p.add(key+".args", "%d arguments; the limit is %d", len(pr.Args), flow.MaxArgs)
		}
		for _, a := range pr.Args {
			if len(a) > flow.MaxArgLen {
				p.add(key+".args", "an argument of %d bytes; the limit is %d", len(a), flow.MaxArgLen)
			}
		}
		c.validateRetry(key+".retry", pr.Retry, p)
	}
}

// validateRuntimes checks the runtimes the worker serves, then each
// configured runtime.
func (c *Config) validateRuntimes(p *problems) {
	for _, name := range c.Worker.Runtimes {
		if _, ok := c.Runtimes[name]; !ok {
			p.add("worker.runtimes", "unknown runtime %q (configured: %s)", name, strings.Join(c.RuntimeNames(), ", "))
		}
	}
	for _, name := range c.RuntimeNames() {
		validateRuntime(p, name, c.Runtimes[name])
	}
}

func validateRuntime(p *problems, name string, rt Runtime) {
	key := "runtimes." + name
	if err := drovertype.ValidID(name); err != nil {
		p.add(key, "runtime name: %v", err)
	}
	checkModel(p, key+".model", rt.Model)
	for i, m := range rt.Models {
		checkModel(p, fmt.Sprintf("%s.models[%d]", key, i), m)
	}
	if rt.Adapter == "native" {
		validateNative(key, rt, p.add)
		return
	}
	if rt.Adapter != "command" {
		p.add(key+".adapter", "unknown adapter %q (known: command, native)", rt.Adapter)
	}
	if rt.Binary == "" {
		p.add(key+".binary", "is required")
	}
	if !slices.Contains([]string{"stdin", "arg", "file"}, rt.Input) {
		p.add(key+".input", "must be stdin, arg or file (got %q)", rt.Input)
	}
	for _, d := range []struct {
		k string
		v time.Duration
	}{{"timeout", rt.Timeout}, {"grace", rt.Grace}, {"no_output_timeout", rt.NoOutputTimeout}, {"own_retry_timeout", rt.OwnRetryTimeout}} {
		if d.v < 0 || d.v > MaxTimeout {
			p.add(key+"."+d.k, "must be 0..%s (got %s)", MaxTimeout, d.v)
		}
	}
	if rt.MaxOutputSize < 1024 || rt.MaxOutputSize > MaxOutputSize {
		p.add(key+".max_output_size", "must be 1024..%d bytes (got %d)", int64(MaxOutputSize), rt.MaxOutputSize)
	}
	validateLimits(p, key, rt.Limits)
	if rt.MinVersion != "" && !versionRE.MatchString(rt.MinVersion) {
		p.add(key+".min_version", "must be dotted numbers like 1.2.3 (got %q)", rt.MinVersion)
	}
	if rt.Home != "worker" && rt.Home != "isolated" {
		p.add(key+".home", "must be worker or isolated (got %q)", rt.Home)
	}
	for _, f := range rt.HomeFiles {
		if f == "" || filepath.IsAbs(f) || strings.HasPrefix(filepath.Clean(f), "..") {
			p.add(key+".home_files", "%q must be a path relative to HOME, inside it", f)
		}
	}
	if !slices.Contains(drovertype.OutputFormats, rt.Output) {
		p.add(key+".output", "unknown output format %q (known: %v, or a CLI's name)", rt.Output, drovertype.OutputFormats)
	}
	if rt.Model != "" && rt.ModelFlag == "" {
		p.add(key+".model_flag", "is required to pass model %q", rt.Model)
	}
	for _, e := range rt.Env {
		if n, _, ok := strings.Cut(e, "="); !ok || n == "" || strings.ContainsAny(n, " \t\n") {
			p.add(key+".env", "entry %q is not NAME=value", e)
		}
	}
	for field, names := range map[string][]string{"env_passthrough": rt.EnvPassthrough, "env_passthrough_add": rt.EnvPassthroughAdd} {
		for _, e := range names {
			if e == "" || strings.ContainsAny(e, "= \t\n") {
				p.add(key+"."+field, "bad variable name %q", e)
			}
		}
	}
	if rt.ProviderConfig != "" && rt.ProviderConfig != "none" && !slices.Contains(ProviderConfigs, rt.ProviderConfig) {
		p.add(key+".provider_config", "must be %s or none (got %q)", strings.Join(ProviderConfigs, ", "), rt.ProviderConfig)
	}
}

// checkModel checks a model the configuration sets as a flow's is checked
// (flow.ModelProblem): the runtime's CLI gets it as an argument.
func checkModel(p *problems, key, model string) {
	if msg := flow.ModelProblem(model); msg != "" {
		p.add(key, "%s", msg)
	}
}

// ProviderConfigs are the CLIs whose provider configuration
// Runtime.ProviderConfig may name (package adapter reads them).
var ProviderConfigs = []string{"codex", "pi", "opencode", "kilo"}

// Passthrough is every name of the worker's environment the CLI may see
// beyond the base list: EnvPassthrough, then EnvPassthroughAdd, each once.
func (rt Runtime) Passthrough() []string {
	var out []string
	for _, n := range append(slices.Clone(rt.EnvPassthrough), rt.EnvPassthroughAdd...) {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// validateLimits checks a runtime's resource limits, which are in bytes:
// a value that reads like megabytes is refused.
func validateLimits(p *problems, key string, l Limits) {
	if l.OpenFiles > MaxOpenFiles {
		p.add(key+".limits.open_files", "must be 0..%d (got %d)", MaxOpenFiles, l.OpenFiles)
	}
	if l.AddressSpace != 0 && l.AddressSpace < MinAddressSpace {
		p.add(key+".limits.address_space", "must be 0 (unset) or at least %d bytes, %s (got %d): it is in bytes", uint64(MinAddressSpace), ByteSize(MinAddressSpace), l.AddressSpace)
	}
	if l.FileSize != 0 && l.FileSize < MinFileSize {
		p.add(key+".limits.file_size", "must be 0 (unset) or at least %d bytes, %s (got %d): it is in bytes", uint64(MinFileSize), ByteSize(MinFileSize), l.FileSize)
	}
}

// ProjectNames returns the configured project names, sorted.
func (c *Config) ProjectNames() []string {
	names := make([]string, 0, len(c.Projects))
	for n := range c.Projects {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var classRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

func (c *Config) validateRetry(key string, r Retry, p *problems) {
	if r.MaxAttempts < 0 || r.MaxAttempts > MaxAttempts {
		p.add(key+".max_attempts", "must be 1..%d, or 0 to inherit (got %d)", MaxAttempts, r.MaxAttempts)
	}
	if r.InitialBackoff < 0 || r.MaxBackoff < 0 {
		p.add(key, "backoffs must not be negative")
	}
	if r.InitialBackoff > 0 && r.MaxBackoff > 0 && r.InitialBackoff > r.MaxBackoff {
		p.add(key+".initial_backoff", "%s is above max_backoff %s", r.InitialBackoff, r.MaxBackoff)
	}
	// Negated ranges, so that NaN fails them too.
	if r.Coefficient != 0 && !(r.Coefficient >= 1 && r.Coefficient <= MaxCoefficient) {
		p.add(key+".coefficient", "must be 1..%d (got %g)", MaxCoefficient, r.Coefficient)
	}
	if r.Jitter != nil && !(*r.Jitter >= 0 && *r.Jitter <= 1) {
		p.add(key+".jitter", "must be 0..1 (got %g)", *r.Jitter)
	}
	checkWait(p, key+".rate_limit_wait", r.RateLimitWait)
	if len(r.RetryOn) > flow.MaxRetryOn {
		p.add(key+".retry_on", "%d classes; the limit is %d", len(r.RetryOn), flow.MaxRetryOn)
	}
	if len(r.Fallback) > flow.MaxFallback {
		p.add(key+".fallback", "%d runtimes; the limit is %d", len(r.Fallback), flow.MaxFallback)
	}
	for i, cl := range r.RetryOn {
		switch {
		case !classRE.MatchString(string(cl)):
			p.add(key+".retry_on", "%q is not an error class like RATE_LIMITED", cl)
		case !cl.Known():
			p.add(key+".retry_on", "unknown error class %q (known: %s)", cl, drovertype.Classes())
		case slices.Contains(r.RetryOn[:i], cl):
			p.add(key+".retry_on", "%s is listed twice", cl)
		}
	}
	for i, rt := range r.Fallback {
		switch _, ok := c.Runtimes[rt]; {
		case !ok:
			p.add(key+".fallback", "unknown runtime %q (configured: %s)", rt, strings.Join(c.RuntimeNames(), ", "))
		case slices.Contains(r.Fallback[:i], rt):
			p.add(key+".fallback", "%s is listed twice", rt)
		}
	}
}

// NATSURLFile is where the controller writes the embedded server's URL, so
// that CLI commands on the same host find it without configuration.
func (c *Config) NATSURLFile() string { return filepath.Join(c.DataDir, "nats.url") }

// ClientURL is the NATS URL clients connect to: the configured one, else the
// embedded server's as written in the data dir, else the default listen address.
func (c *Config) ClientURL() string {
	if c.NATS.URL != "" {
		return c.NATS.URL
	}
	if b, err := os.ReadFile(c.NATSURLFile()); err == nil {
		if u := strings.TrimSpace(string(b)); u != "" {
			return u
		}
	}
	return "nats://" + c.NATS.Listen
}

// ErrNoNATSURL is wrapped by the error of an operator command whose data
// dir, given explicitly, tells no NATS URL: no controller serves it, or the
// dir is mistyped.
var ErrNoNATSURL = errors.New("config: no NATS URL for the data dir")

// maxURLFile bounds what is read of DATA_DIR/nats.url.
const maxURLFile = 4 << 10

// OperatorURL is the NATS URL an operator command connects to: nats.url
// when it is set; else the URL the controller serving the data dir wrote
// to DATA_DIR/nats.url. Only the default data dir (~/.drover) falls back to
// nats.listen's address when that file is missing: a dir given with
// --data-dir, DROVER_DATA_DIR or data_dir is the controller the operator
// means, and a mistyped one must not reach whichever controller listens
// there. An error names the dir and what it lacks (ErrNoNATSURL), or the
// file when it holds no URL (ErrInvalid).
func (c *Config) OperatorURL() (string, error) {
	if c.NATS.URL != "" {
		return c.NATS.URL, nil
	}
	file := c.NATSURLFile()
	b, err := readlimit.File(file, maxURLFile)
	switch {
	case err == nil:
		u := strings.TrimSpace(string(b))
		if !natsURL(u) {
			return "", fmt.Errorf("%w: %s: holds %.40q, not a NATS URL like nats://127.0.0.1:4222 (the controller writes it when it starts: remove the file, or give --nats-url)", ErrInvalid, file, u)
		}
		return u, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("%w: %v", ErrInvalid, err)
	case filepath.Clean(c.DataDir) == DefaultDataDir():
		return "nats://" + c.NATS.Listen, nil
	}
	if _, err := os.Stat(c.DataDir); err != nil {
		return "", fmt.Errorf("%w: data dir %s does not exist (is --data-dir or DROVER_DATA_DIR right?)", ErrNoNATSURL, c.DataDir)
	}
	return "", fmt.Errorf("%w: data dir %s holds no nats.url: no controller serves it (is --data-dir right? start one with `controller serve --data-dir %s`, or give --nats-url)", ErrNoNATSURL, c.DataDir, c.DataDir)
}

// natsURL reports whether u is one server's URL a client can dial.
func natsURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && slices.Contains([]string{"nats", "tls", "ws", "wss"}, p.Scheme) && p.Host != "" &&
		strings.IndexFunc(u, func(r rune) bool { return r <= ' ' || r == 0x7f }) < 0
}

// SanitizeID makes an id of s, a host name say: every character but ASCII
// letters, digits and '-' becomes '-', the ends are trimmed of '-', and the
// id is cut to 63 characters ("worker" when nothing is left).
func SanitizeID(s string) string {
	b := []byte(s)
	for i, ch := range b {
		ok := ch == '-' || ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z'
		if !ok {
			b[i] = '-'
		}
	}
	s = strings.Trim(string(b), "-")
	if len(s) > 63 {
		s = s[:63]
	}
	if s == "" {
		s = "worker"
	}
	return s
}

var versionRE = regexp.MustCompile(`^\d+(\.\d+)*$`)

// minConsoleToken is the shortest console token accepted.
const minConsoleToken = 16

func (c *Config) validateConsole(bad func(string, string, ...any)) {
	k := c.Console
	if t := k.Token.Value(); t != "" && len(t) < minConsoleToken {
		bad("console.token", "must be at least %d characters (got %d)", minConsoleToken, len(t))
	}
	if k.SessionTTL != 0 && k.SessionTTL < time.Minute {
		bad("console.session_ttl", "must be at least 1m (got %s)", k.SessionTTL)
	}
	seen := map[string]bool{}
	for i, u := range k.Users {
		key := fmt.Sprintf("console.users[%d]", i)
		switch {
		case u.Name == "" || len(u.Name) > 64 || strings.ContainsAny(u.Name, " \t\r\n"):
			bad(key+".name", "must be 1..64 characters without blanks (got %q)", u.Name)
		case seen[u.Name]:
			bad(key+".name", "%q is listed twice", u.Name)
		}
		seen[u.Name] = true
		if _, err := bcrypt.Cost([]byte(u.PasswordHash.Value())); err != nil {
			bad(key+".password_hash", "is not a bcrypt hash (make one with `controller console hash-password`)")
		}
	}
}
