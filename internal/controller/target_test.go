package controller

import (
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/drovertype"
)

func TestParseTarget(t *testing.T) {
	cases := []struct {
		in   string
		want Target
		bad  bool
	}{
		{in: "hello-x1y2z3", want: Target{Flow: "hello-x1y2z3"}},
		{in: "hello-x1y2z3/greet", want: Target{Flow: "hello-x1y2z3", Task: "greet"}},
		{in: "hello-x1y2z3_greet_2", want: Target{Flow: "hello-x1y2z3", Task: "greet", Attempt: "hello-x1y2z3_greet_2"}},
		{in: "", bad: true},
		{in: "f/", bad: true},
		{in: "/t", bad: true},
		{in: "f/t/x", bad: true},
		{in: "f_t", bad: true},
		{in: "f_t_0", bad: true},
		{in: "f_t_01", bad: true},
		{in: "f_t_x", bad: true},
		{in: "f_t_1_2", bad: true},
		{in: "f.>", bad: true},
		{in: "../etc", bad: true},
	}
	for _, tc := range cases {
		got, err := ParseTarget(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("ParseTarget(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseTarget: whatever an operator types, an accepted target holds only
// valid ids (they become subjects and keys), and an attempt id names its flow
// and task.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"f", "f/t", "f_t_1", "f_t_", "a/b/c", "x_y_z_1", "\x00", "f/t\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTarget(s)
		if err != nil {
			return
		}
		if drovertype.ValidID(got.Flow) != nil {
			t.Fatalf("%q: invalid flow %q accepted", s, got.Flow)
		}
		if got.Task != "" && drovertype.ValidID(got.Task) != nil {
			t.Fatalf("%q: invalid task %q accepted", s, got.Task)
		}
		if got.Attempt != "" && (got.Attempt != s || !strings.HasPrefix(s, got.Flow+"_"+got.Task+"_")) {
			t.Fatalf("%q: attempt %+v", s, got)
		}
	})
}
