// Command summarize turns `go test -bench` output into one Markdown table per
// benchmark: every custom metric's median with its min and max over the runs
// (`-count N` gives N runs of each benchmark), and, when targets are given,
// whether the median meets them. benchstat compares runs; it does not print
// the min and max, which is what docs/benchmarks.md reports.
//
//	go test -run '^$' -bench . -benchtime 1x -count 5 ./bench/ | tee bench.txt
//	go run ./bench/summarize -target 'EndToEnd:ratio<=1.10' bench.txt
//
// A target is BENCHMARK:METRIC<=VALUE or BENCHMARK:METRIC>=VALUE, where
// BENCHMARK matches any benchmark whose name (without "Benchmark" and the
// -GOMAXPROCS suffix) starts with it. ns/op, B/op and allocs/op are left out
// unless -all is given or a benchmark reports nothing else: the scenarios'
// own metrics are what they measure.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

type targets []target

type target struct {
	bench, metric string
	atMost        bool // <=, else >=
	value         float64
}

func (t *targets) String() string { return fmt.Sprint(*t) }

func (t *targets) Set(s string) error {
	bench, rest, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("target %q: want BENCHMARK:METRIC<=VALUE or >=VALUE", s)
	}
	for _, op := range []string{"<=", ">="} {
		if metric, v, ok := strings.Cut(rest, op); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("target %q: %w", s, err)
			}
			*t = append(*t, target{bench: strings.TrimPrefix(bench, "Benchmark"), metric: metric, atMost: op == "<=", value: f})
			return nil
		}
	}
	return fmt.Errorf("target %q: want BENCHMARK:METRIC<=VALUE or >=VALUE", s)
}

func main() {
	var tg targets
	all := flag.Bool("all", false, "include ns/op, B/op, allocs/op and MB/s")
	flag.Var(&tg, "target", "BENCHMARK:METRIC<=VALUE or >=VALUE; repeatable")
	flag.Parse()
	var in []io.Reader
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "summarize:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = append(in, f)
	}
	if len(in) == 0 {
		in = append(in, os.Stdin)
	}
	res, err := parse(io.MultiReader(in...))
	if err != nil {
		fmt.Fprintln(os.Stderr, "summarize:", err)
		os.Exit(1)
	}
	if len(res.order) == 0 {
		fmt.Fprintln(os.Stderr, "summarize: no benchmark results in the input")
		os.Exit(1)
	}
	write(os.Stdout, res, tg, *all)
}

// results are the parsed runs: per benchmark, per metric, every value.
type results struct {
	header  []string // goos, goarch, cpu lines, once each
	order   []string // benchmarks in order of first appearance
	bench   map[string]*benchmark
	skipped []string // "name: reason" of each skipped benchmark (go test -v)
}

type benchmark struct {
	pkg     string
	metrics []string // in order of first appearance
	values  map[string][]float64
}

// headerKeys start the lines that describe the machine: go test's, and
// those scripts/bench.sh adds.
var headerKeys = map[string]bool{"goos": true, "goarch": true, "cpu": true, "pkg": true,
	"nproc": true, "go": true, "disk": true, "workdir": true}

var skipped = map[string]bool{"ns/op": true, "B/op": true, "allocs/op": true, "MB/s": true}

func parse(r io.Reader) (*results, error) {
	res := &results{bench: map[string]*benchmark{}}
	seenHeader := map[string]bool{}
	pkg := ""
	var logged []string // a benchmark's log lines, printed before its --- SKIP
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		switch {
		case strings.HasPrefix(raw, "    "):
			logged = append(logged, line)
			continue
		case strings.HasPrefix(line, "--- SKIP: "):
			name := trimProcs(strings.Fields(strings.TrimPrefix(line, "--- SKIP: "))[0])
			res.skipped = append(res.skipped, strings.TrimPrefix(name, "Benchmark")+": "+strings.Join(logged, " "))
			logged = nil
			continue
		case strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "---") || strings.HasPrefix(line, "==="):
			logged = nil
		}
		if k, v, ok := strings.Cut(line, ": "); ok && headerKeys[k] {
			if k == "pkg" {
				pkg = v
				continue
			}
			if !seenHeader[line] {
				seenHeader[line] = true
				res.header = append(res.header, line)
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // a benchmark's name printed alone, or its log
		}
		name := trimProcs(f[0])
		b := res.bench[name]
		if b == nil {
			b = &benchmark{pkg: pkg, values: map[string][]float64{}}
			res.bench[name] = b
			res.order = append(res.order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: value %q: %w", name, f[i], err)
			}
			unit := f[i+1]
			if _, ok := b.values[unit]; !ok {
				b.metrics = append(b.metrics, unit)
			}
			b.values[unit] = append(b.values[unit], v)
		}
	}
	return res, sc.Err()
}

// trimProcs drops the -GOMAXPROCS suffix go test appends to a name.
func trimProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}

// stats are a metric's median, min and max.
type stats struct{ median, min, max float64 }

func summarize(vs []float64) stats {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return stats{median: med, min: s[0], max: s[n-1]}
}

func write(w io.Writer, res *results, tg targets, all bool) {
	for _, h := range res.header {
		fmt.Fprintln(w, h)
	}
	for _, name := range res.order {
		b := res.bench[name]
		short := strings.TrimPrefix(name, "Benchmark")
		fmt.Fprintf(w, "\n### %s", short)
		if b.pkg != "" {
			fmt.Fprintf(w, " (%s)", b.pkg)
		}
		fmt.Fprintf(w, "\n\n| metric | median (min–max) | runs | target |\n| --- | --- | --- | --- |\n")
		// A micro-benchmark without metrics of its own shows the standard ones.
		custom := slices.ContainsFunc(b.metrics, func(m string) bool { return !skipped[m] })
		for _, m := range b.metrics {
			if skipped[m] && custom && !all {
				continue
			}
			s := summarize(b.values[m])
			fmt.Fprintf(w, "| %s | %s (%s–%s) | %d | %s |\n", m, num(s.median), num(s.min), num(s.max), len(b.values[m]),
				verdict(tg, short, m, s.median))
		}
	}
	if len(res.skipped) > 0 {
		fmt.Fprintf(w, "\n### Skipped\n\n")
		for _, s := range res.skipped {
			fmt.Fprintf(w, "- %s\n", s)
		}
	}
}

// verdict says whether median meets the targets set for this metric.
func verdict(tg targets, bench, metric string, median float64) string {
	var out []string
	for _, t := range tg {
		if t.metric != metric || !strings.HasPrefix(bench, t.bench) {
			continue
		}
		op, ok := "≥", median >= t.value
		if t.atMost {
			op, ok = "≤", median <= t.value
		}
		mark := "met"
		if !ok {
			mark = "**missed**"
		}
		out = append(out, fmt.Sprintf("%s %s: %s", op, num(t.value), mark))
	}
	return strings.Join(out, "; ")
}

// num prints a figure with three or four significant digits, without an
// exponent.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000:
		return group(strconv.FormatFloat(math.Round(v), 'f', 0, 64))
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case a == 0:
		return "0"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// group puts thousands separators into an integer.
func group(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
