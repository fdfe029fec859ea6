package main

import (
	"strings"
	"testing"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/drover-dev/drover/bench
cpu: AMD EPYC
BenchmarkEndToEnd/tasks=200-2   	       1	38472440660 ns/op	        23.12 drover_s	         4.0 floor_s	         5.78 ratio
BenchmarkEndToEnd/tasks=200-2   	       1	42113160448 ns/op	        18.72 drover_s	        11.45 floor_s	         1.635 ratio
BenchmarkEndToEnd/tasks=200-2   	       1	40000000000 ns/op	        20.00 drover_s	        10.00 floor_s	         2.0 ratio
--- BENCH: BenchmarkEndToEnd/tasks=200-2
    e2e_test.go:1: some log
PASS
ok  	github.com/drover-dev/drover/bench	97.882s
pkg: github.com/drover-dev/drover/internal/controller
BenchmarkFold-2   	       1	10366857119 ns/op	   0.00 MB/s	      5078 events/s	     11526 raw_ack_events/s
BenchmarkFold-2   	       1	9329931081 ns/op	   0.00 MB/s	      53988 events/s	     47690 raw_ack_events/s
BenchmarkParseHostile-2   	     100	   1234567 ns/op	  2048 B/op	      12 allocs/op
BenchmarkScale
BenchmarkScale/tasks=10000_vs_1000
    scale_test.go:84: the 10000-task flow cannot run: nats: maximum payload exceeded
--- SKIP: BenchmarkScale/tasks=10000_vs_1000
`

func TestSummarize(t *testing.T) {
	res, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var tg targets
	for _, s := range []string{"EndToEnd:ratio<=1.10", "BenchmarkFold:events/s>=50000"} {
		if err := tg.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	write(&out, res, tg, false)
	got := out.String()
	for _, want := range []string{
		"goos: linux\ngoarch: amd64\ncpu: AMD EPYC\n",
		"### EndToEnd/tasks=200 (github.com/drover-dev/drover/bench)",
		"| drover_s | 20.0 (18.7–23.1) | 3 |  |",
		"| ratio | 2.00 (1.64–5.78) | 3 | ≤ 1.10: **missed** |",
		"### Fold (github.com/drover-dev/drover/internal/controller)",
		"| events/s | 29,533 (5,078–53,988) | 2 | ≥ 50,000: **missed** |",
		"| raw_ack_events/s | 29,608 (11,526–47,690) | 2 |  |",
		"### ParseHostile",
		"| ns/op | 1,234,567 (1,234,567–1,234,567) | 1 |  |",
		"| allocs/op | 12.0 (12.0–12.0) | 1 |  |",
		"### Skipped\n\n- Scale/tasks=10000_vs_1000: scale_test.go:84: the 10000-task flow cannot run: nats: maximum payload exceeded\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	if fold := got[strings.Index(got, "### Fold"):strings.Index(got, "### ParseHostile")]; strings.Contains(fold, "ns/op") || strings.Contains(fold, "MB/s") {
		t.Errorf("a benchmark with metrics of its own shows the default ones without -all:\n%s", fold)
	}
}

func TestTargetSyntax(t *testing.T) {
	var tg targets
	for _, bad := range []string{"ratio<=1", "EndToEnd:ratio<1", "EndToEnd:ratio<=x"} {
		if err := tg.Set(bad); err == nil {
			t.Errorf("target %q accepted", bad)
		}
	}
}
