package config

import (
	"fmt"
	"math"
	"net"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/drover-dev/drover/internal/readlimit"
)

// What viper would read loosely, Load reads strictly: a duration needs a
// unit (90 is 90ns to Go, and no operator means that), an integer takes no
// fraction (2.5 slots is not 2), a boolean is true or false. The checks run
// on the merged values before they are decoded, so each error names the
// key and where its value came from.

// sources says where a key's value came from, for error messages.
type sources struct {
	file  string
	flags *pflag.FlagSet
	bind  map[string]string // config key -> flag name
	env   map[string]string // config key -> variable, for runtime fields bound by name
}

func (s sources) of(v *viper.Viper, key string) string {
	if name, ok := s.bind[key]; ok && s.flags != nil {
		if f := s.flags.Lookup(name); f != nil && f.Changed {
			return "--" + name
		}
	}
	env := s.env[key]
	if env == "" {
		env = envName(key)
	}
	if val, ok := os.LookupEnv(env); ok && val != "" {
		return "$" + env
	}
	if s.file != "" && v.InConfig(key) {
		return s.file
	}
	return "default"
}

// envName is the DROVER_* variable of a config key.
func envName(key string) string {
	return "DROVER_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(key))
}

var durationType = reflect.TypeFor[time.Duration]()

// keyType is the Go type a dotted key decodes into, following the
// mapstructure tags of Config; a map level takes one key element (a
// runtime's or project's name).
func keyType(key string) (reflect.Type, bool) {
	t := reflect.TypeFor[Config]()
	parts := strings.Split(key, ".")
	for i := 0; i < len(parts); i++ {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByTag(t, parts[i])
			if !ok {
				return nil, false
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem()
		default:
			return nil, false
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t, true
}

func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// checkValues refuses the values that would decode with a loss or a
// surprise. Keys that are not in Config are left to the decoder's unused
// key check.
func checkValues(v *viper.Viper, src sources) []error {
	var errs []error
	keys := v.AllKeys()
	sort.Strings(keys)
	for _, key := range keys {
		t, ok := keyType(key)
		if !ok {
			continue
		}
		if problem := checkValue(t, v.Get(key)); problem != "" {
			errs = append(errs, fmt.Errorf("%w: %s: %s (from %s)", ErrInvalid, key, problem, src.of(v, key)))
		}
	}
	return errs
}

// checkValue says what is wrong with val as a value of type t, or "".
func checkValue(t reflect.Type, val any) string {
	if val == nil {
		return ""
	}
	rv := reflect.ValueOf(val)
	if rv.Type() == t {
		return "" // a default, or a flag's own type
	}
	switch {
	case t == durationType:
		switch rv.Kind() {
		case reflect.String:
			s := strings.TrimSpace(rv.String())
			if s == "" {
				return ""
			}
			if _, err := time.ParseDuration(s); err != nil {
				if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
					return fmt.Sprintf("%q has no unit: write a duration like %ss, %sm or %sh", s, s, s, s)
				}
				return fmt.Sprintf("%q is not a duration: write it with a unit, like 90s, 15m or 1h30m", s)
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			if n := fmt.Sprint(val); n != "0" {
				return fmt.Sprintf("%s has no unit: write a duration like %ss, %sm or %sh (a bare number would be nanoseconds)", n, n, n, n)
			}
		case reflect.Bool:
			return fmt.Sprintf("%v is not a duration", val)
		}
	case isInt(t.Kind()):
		if isUint(t.Kind()) && negative(rv) {
			// Decoded, it would wrap around to a huge count: -1 CPU
			// seconds would be no limit at all.
			return fmt.Sprintf("must not be negative (got %v)", val)
		}
		switch rv.Kind() {
		case reflect.Float32, reflect.Float64:
			if f := rv.Float(); f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
				return fmt.Sprintf("must be a whole number (got %v)", val)
			}
		case reflect.String:
			s := strings.TrimSpace(rv.String())
			if t == reflect.TypeFor[ByteSize]() {
				// A size with a unit is byteSizeHook's; a bare number is bytes.
				if f, err := strconv.ParseFloat(s, 64); err == nil && f != math.Trunc(f) {
					return fmt.Sprintf("must be a whole number of bytes, or a size with a unit like 512MiB (got %q)", s)
				}
				return ""
			}
			if _, err := strconv.ParseInt(s, 10, 64); err != nil {
				if _, uerr := strconv.ParseUint(s, 10, 64); uerr != nil {
					return fmt.Sprintf("must be a whole number (got %q)", s)
				}
			}
		case reflect.Bool:
			return fmt.Sprintf("must be a number (got %v)", val)
		}
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		switch rv.Kind() {
		case reflect.String:
			if _, err := strconv.ParseFloat(strings.TrimSpace(rv.String()), 64); err != nil {
				return fmt.Sprintf("must be a number (got %q)", rv.String())
			}
		case reflect.Bool:
			return fmt.Sprintf("must be a number (got %v)", val)
		}
	case t.Kind() == reflect.Bool:
		switch rv.Kind() {
		case reflect.String:
			if _, err := strconv.ParseBool(strings.TrimSpace(rv.String())); err != nil {
				return fmt.Sprintf("must be true or false (got %q)", rv.String())
			}
		case reflect.Bool:
		default:
			return fmt.Sprintf("must be true or false (got %v)", val)
		}
	}
	return ""
}

func isUint(k reflect.Kind) bool {
	switch k {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// negative reports whether v, a value as the file, a variable or a flag
// gave it, is a number below zero.
func negative(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() < 0
	case reflect.Float32, reflect.Float64:
		return v.Float() < 0
	case reflect.String:
		return strings.HasPrefix(strings.TrimSpace(v.String()), "-")
	}
	return false
}

func isInt(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// Drover's own DROVER_* variables that are not configuration keys, which a
// Drover process may find in its environment and must not refuse.
var (
	// droverVars are set by Drover for what it runs, or read by its tests
	// and tools: a worker gives a CLI DROVER_FLOW_ID, DROVER_TASK_ID,
	// DROVER_ATTEMPT_ID, DROVER_WORKTREE and (for a validator) DROVER_ROLE,
	// and a CLI may itself run `controller status`; DROVER_CHAOS and
	// DROVER_CHAOS_SEED drive the chaos test; DROVER_NATS_CHART the chart's
	// tests.
	droverVars = []string{"DROVER_CONFIG", "DROVER_FLOW_ID", "DROVER_TASK_ID", "DROVER_ATTEMPT_ID",
		"DROVER_WORKTREE", "DROVER_ROLE", "DROVER_CHAOS", "DROVER_CHAOS_SEED", "DROVER_NATS_CHART"}
	// droverPrefixes are families of test and benchmark variables.
	droverPrefixes = []string{"DROVER_BENCH_", "DROVER_E2E_", "DROVER_TEST_"}
	// kubeServiceVar is what Kubernetes puts in every pod for each service
	// of its namespace (enableServiceLinks): a release named drover has
	// services drover-controller and drover-nats, hence
	// DROVER_NATS_SERVICE_HOST, DROVER_NATS_PORT_4222_TCP_ADDR, ...
	kubeServiceVar = regexp.MustCompile(`^DROVER_[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$`)
	// serverConfigVar finds the variables a nats-server config refers to
	// ($NAME, ${NAME}), which the embedded server reads from the
	// controller's environment (docs/security.md names its passwords
	// $DROVER_CONTROLLER_PASSWORD and so on).
	serverConfigVar = regexp.MustCompile(`\$\{?(DROVER_[A-Z0-9_]+)`)
	serverInclude   = regexp.MustCompile(`(?m)^\s*include\s+['"]?([^'"\s;]+)`)
)

// maxSmallFile bounds the configuration files Drover or a library reads
// whole: a config file, nats-server's, credentials, keys and certificates.
const maxSmallFile = 4 << 20

// checkEnv refuses DROVER_* variables that are neither a key nor one of
// Drover's own: a misspelt DROVER_WRKER_SLOTS must not be ignored in
// silence. Each is named with the closest variable that exists.
func checkEnv(environ []string, c *Config) []error {
	known := knownVars()
	refs := serverConfigVars(c.NATS.ServerConfig)
	var errs []error
	var names []string
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "DROVER_") || val == "" || known[name] || refs[name] || allowedVar(name) {
			continue
		}
		if _, _, ok := runtimeVar(name); ok {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		errs = append(errs, fmt.Errorf("%w: %s: not a Drover variable%s (docs/config.md lists them)", ErrInvalid, name, suggest(name, known)))
	}
	return errs
}

func allowedVar(name string) bool {
	for _, v := range droverVars {
		if name == v {
			return true
		}
	}
	for _, p := range droverPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return kubeServiceVar.MatchString(name)
}

// knownVars are the variables of every scalar key.
func knownVars() map[string]bool {
	known := map[string]bool{}
	for k := range defaults() {
		known[envName(k)] = true
	}
	for k := range natsDefaults() {
		known[envName(k)] = true
	}
	return known
}

// runtimeVar splits DROVER_RUNTIMES_<NAME>_<FIELD> into the runtime's name
// (with - for _) and its field, longest field first: _VERSION_ARGS is not
// _ARGS of a runtime named "x-version".
func runtimeVar(name string) (runtime, field string, ok bool) {
	r, ok := strings.CutPrefix(name, "DROVER_RUNTIMES_")
	if !ok {
		return "", "", false
	}
	for _, f := range runtimeFields {
		if n, ok := strings.CutSuffix(strings.ToLower(r), "_"+f); ok && n != "" {
			return strings.ReplaceAll(n, "_", "-"), f, true
		}
	}
	return "", "", false
}

// suggest names the closest known variable, or the file key a variable
// means when that key can only be set in the file.
func suggest(name string, known map[string]bool) string {
	if key, ok := fileOnlyKey(name); ok {
		return fmt.Sprintf(": %s has no variable, set it in the config file", key)
	}
	best, bestD := "", math.MaxInt
	try := func(cand string) {
		if d := distance(name, cand); d < bestD || d == bestD && cand < best {
			best, bestD = cand, d
		}
	}
	for k := range known {
		try(k)
	}
	if r, ok := strings.CutPrefix(name, "DROVER_RUNTIMES_"); ok {
		// The runtime's name is free: try each field after each split.
		for i := range len(r) {
			if r[i] != '_' || i == 0 {
				continue
			}
			for _, f := range runtimeFields {
				try("DROVER_RUNTIMES_" + r[:i] + "_" + strings.ToUpper(f))
			}
		}
	}
	if bestD > max(3, len(name)/5) {
		return ""
	}
	return "; did you mean " + best + "?"
}

// fileOnlyKey finds a key of Config that name spells but that has no
// variable (lists and pointers: defaults.retry.jitter, retry_on, fallback).
func fileOnlyKey(name string) (string, bool) {
	var found string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == durationType {
			if envName(prefix) == name {
				found = prefix
			}
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if tag == "" || f.Type.Kind() == reflect.Map {
				continue
			}
			key := tag
			if prefix != "" {
				key = prefix + "." + tag
			}
			walk(f.Type, key)
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return found, found != ""
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// serverConfigVars are the DROVER_* variables a nats-server config file and
// the files it includes refer to. Unreadable files give none: the server
// config check reports them.
func serverConfigVars(path string) map[string]bool {
	vars := map[string]bool{}
	if path == "" {
		return vars
	}
	seen := map[string]bool{}
	var scan func(p string, depth int)
	scan = func(p string, depth int) {
		if depth > 8 || seen[p] || len(seen) > 64 {
			return
		}
		seen[p] = true
		b, err := readlimit.File(p, maxSmallFile)
		if err != nil {
			return
		}
		for _, m := range serverConfigVar.FindAllSubmatch(b, -1) {
			vars[string(m[1])] = true
		}
		for _, m := range serverInclude.FindAllSubmatch(b, -1) {
			inc := string(m[1])
			if !strings.HasPrefix(inc, "/") {
				inc = dirOf(p) + "/" + inc // nats-server resolves includes beside the file
			}
			scan(inc, depth+1)
		}
	}
	scan(path, 0)
	return vars
}

func dirOf(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[:i]
	}
	return "."
}

// Loopback reports whether a listen host takes connections from this host
// only: a loopback address or "localhost". An empty host, 0.0.0.0, ::,
// another address or a host name (which may resolve to anything) do not.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// InsecureHTTP reports whether the profiler is served beyond loopback,
// which Validate allows only with insecure_listen: the daemons warn of it.
func (c *Config) InsecureHTTP() bool {
	host, _, err := net.SplitHostPort(c.HTTP.Listen)
	return c.HTTP.Listen != "" && c.HTTP.Pprof && err == nil && !Loopback(host)
}
