package projection_test

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/projection/foldtest"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
	"github.com/drover-dev/drover/internal/eventlog/projection"
)

// TestPayloadTypes: every type the fold has a handler for is decoded in
// one pass into the type its handler reads, and folds without a payload
// type error; and the list below, the types Drover writes that the fold
// reads, is the handlers table.
func TestPayloadTypes(t *testing.T) {
	types := []event.Type{
		event.FlowSubmitted, event.FlowTasksSubmitted, event.FlowCompleted, event.AttemptScheduled, event.AttemptClaimed,
		event.AdapterInitialized, event.PrepareCompleted, event.RuntimeCapabilitiesEvaluated, event.RuntimeStarted, event.RuntimeExited, event.FileModified,
		event.DiffComputed, event.CheckpointCommitCreated, event.RuntimeTerminated, event.AttemptReported,
		event.RuntimeErrorClassified, event.TaskFailed, event.VerificationCompleted, event.RuntimeRecoveryScheduled,
		event.CancelRequested, event.TaskCancelled, event.FlowPaused, event.FlowResumed, event.TaskRetryRequested,
		event.AttemptAbandoned, event.AttemptLost, event.IntegrationScheduled, event.FlowIntegrated,
		event.CooldownStarted, event.CooldownReleased, event.AttemptWithdrawn, event.TaskWaiting, event.BudgetSet,
		event.PlacementChanged, event.AttemptUnplaced,
		event.PullRequestRequested, event.PullRequestPublished, event.PullRequestObserved, event.PullRequestFeedback,
		event.ReviewRoundStarted,
		event.LeaderElected,
	}
	if got, want := slices.Sorted(slices.Values(projection.HandledTypes())), slices.Sorted(slices.Values(types)); !slices.Equal(got, want) {
		t.Errorf("handlers table has %v\nwant %v", got, want)
	}
	for _, typ := range types {
		ev, err := event.New("e1", typ, time.Now(), "f", "a", "f-a-1", 1, struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := ev.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if !projection.DecodeOnePass(raw) {
			t.Errorf("%s: an event as Drover writes it is not decoded in one pass", typ)
		}
		d := projection.DecodeForFold(foldtest.Subject(raw), raw)
		dev, payload, _, derr := d.Parts()
		if derr != nil {
			t.Fatalf("%s: %v", typ, derr)
		}
		if payload == nil {
			t.Errorf("%s: not decoded ahead", typ)
			continue
		}
		st := projection.NewState()
		if st.ApplyDecoded(1, d) == nil {
			if p := st.Poisons[1]; p != nil && strings.Contains(p.Reason, projection.ErrPayloadType.Error()) {
				t.Errorf("%s: %s", typ, p.Reason)
			}
		}
		if err := projection.NewState().Apply(1, dev); errors.Is(err, projection.ErrPayloadType) {
			t.Errorf("%s: %v", typ, err)
		}
	}
	// A payload that does not decode is poison either way, for the same reason.
	raw := []byte(`{"v":1,"id":"e1","type":"attempt_reported","flow":"f","attempt":"x","data":{"success":"yes"}}`)
	ahead := projection.NewState()
	st := projection.NewState()
	st.ApplyRaw(7, foldtest.Subject(raw), raw)
	if ahead.ApplyDecoded(7, projection.DecodeForFold(foldtest.Subject(raw), raw)) != nil || st.Poisons[7] == nil {
		t.Fatal("an undecodable payload was folded")
	}
	if got, want := ahead.Poisons[7].Reason, st.Poisons[7].Reason; got != want || got == "" {
		t.Errorf("poison reason decoded ahead %q, decoded by the handler %q", got, want)
	}
}

// BenchmarkDecodeForFold compares the fold's one-pass decoding with Decode
// and Payload, on a report carrying a real Claude Code transcript as its
// stdout tail (most of the fold's bytes) and on a claim (most of its events).
func BenchmarkDecodeForFold(b *testing.B) {
	transcript, err := os.ReadFile("../../../testdata/transcripts/claude/success/stdout.txt")
	if err != nil {
		b.Fatal(err)
	}
	events := map[string]struct {
		typ  event.Type
		data any
	}{
		"report": {event.AttemptReported, event.Report{Success: true, Branch: drovertype.AttemptBranch("f", "a", 1), Commit: strings.Repeat("a", 40),
			StdoutTail: string(transcript), FilesCreated: []string{"pkg/new.go"}}},
		"claim": {event.AttemptClaimed, event.AttemptClaimedData{Worker: "worker-1"}},
	}
	for name, e := range events {
		ev, err := event.New("f-a-1-"+string(e.typ), e.typ, time.Now(), "f", "a", "f-a-1", 1, e.data)
		if err != nil {
			b.Fatal(err)
		}
		raw, err := ev.Encode()
		if err != nil {
			b.Fatal(err)
		}
		subject := foldtest.Subject(raw)
		for _, way := range []struct {
			name   string
			decode func(string, []byte) projection.Decoded
		}{{"one-pass", projection.DecodeForFold}, {"two-pass", projection.DecodeTwoPass}} {
			b.Run(name+"/"+way.name, func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					if _, payload, _, err := way.decode(subject, raw).Parts(); err != nil || payload == nil {
						b.Fatalf("not decoded: %v", err)
					}
				}
			})
		}
	}
}

// TestReportDecodedWithoutStdoutTail: the fold's decoder skips a report's
// stdout tail and decodes everything else as a whole report would; a tail
// it cannot simply skip sends the event the two-pass way, with the same
// verdict.
func TestReportDecodedWithoutStdoutTail(t *testing.T) {
	const head = `{"v":1,"id":"r1","type":"attempt_reported","time":"2026-01-01T00:00:00Z","flow":"f","task":"a","attempt":"f_a_1","epoch":1,"data":`
	cases := []struct {
		name, data string
		onePass    bool // decoded in one pass
		poison     bool
	}{
		{"tail with escapes", `{"success":true,"stdout_tail":"{\"type\":\"result\"}\n\u00e9\ud83d\ude00","stderr_tail":"warn","commit":"c1","files_modified":["a.go"]}`, true, false},
		{"tail first", `{"stdout_tail":"x","success":true,"commit":"c1"}`, true, false},
		{"only a tail", `{"stdout_tail":"x"}`, true, false},
		{"empty report", `{}`, true, false},
		{"null tail", `{"success":true,"stdout_tail":null,"commit":"c1"}`, false, false},
		{"escaped name", `{"success":true,"stdout\u005ftail":"x","commit":"c1"}`, true, false},
		{"number tail", `{"success":true,"stdout_tail":3}`, false, true},
		{"tail twice", `{"stdout_tail":"x","stdout_tail":"y"}`, false, true},
		{"invalid UTF-8 in the tail", "{\"stdout_tail\":\"\xff\"}", false, true},
		{"bad member after the tail", `{"stdout_tail":"x","exit_code":"1"}`, false, true},
		{"not an object", `["stdout_tail"]`, false, true},
	}
	for _, c := range cases {
		checkDecodedWithout(t, c.name, head+c.data+"}", c.onePass, c.poison, "its stdout tail",
			func(r *event.Report) { r.StdoutTail = "" })
	}
}

// TestDiffDecodedWithoutDiff: the fold keeps a diff_computed's stat and
// skips its diff, which is checked to be a string as a whole decode checks
// it; anything else goes the two-pass way, with the same verdict.
func TestDiffDecodedWithoutDiff(t *testing.T) {
	const head = `{"v":1,"id":"diff_computed:f_a_1:1","type":"diff_computed","time":"2026-01-01T00:00:00Z","flow":"f","task":"a","attempt":"f_a_1","epoch":1,"data":`
	cases := []struct {
		name, data      string
		onePass, poison bool
	}{
		{"diff", `{"modified":["a.go"],"stat":" a.go | 1 +","diff":"--- a/a.go\n+++ b/a.go\n\u00e9","diff_bytes":30}`, true, false},
		{"no diff", `{"stat":"s","diff_bytes":0}`, true, false},
		{"null diff", `{"stat":"s","diff":null}`, false, false},
		{"number diff", `{"stat":"s","diff":7}`, false, true},
		{"diff twice", `{"diff":"x","diff":"y"}`, false, true},
		{"bad stat", `{"diff":"x","stat":1}`, false, true},
	}
	for _, c := range cases {
		checkDecodedWithout(t, c.name, head+c.data+"}", c.onePass, c.poison, "its diff",
			func(d *event.DiffComputedData) { d.Diff = "" })
	}
}

// checkDecodedWithout checks the fold's decoding of raw, an event whose
// payload is a T: in one pass or not as onePass says, poison or not as
// poison says, and else equal to the whole payload decoded with what the
// fold skips (without, cleared by clear) left out.
func checkDecodedWithout[T any](t *testing.T, name, raw string, onePass, poison bool, without string, clear func(*T)) {
	t.Run(name, func(t *testing.T) {
		checkDecodeForFold(t, []byte(raw))
		if ok := projection.DecodeOnePass([]byte(raw)); ok != onePass {
			t.Errorf("decoded in one pass: %v, want %v", ok, onePass)
		}
		ev, payload, payloadErr, err := projection.DecodeForFold(foldtest.Subject([]byte(raw)), []byte(raw)).Parts()
		if got := err != nil || payloadErr != nil; got != poison {
			t.Fatalf("poison: %v (%v, %v), want %v", got, err, payloadErr, poison)
		}
		if poison {
			return
		}
		got := payload.(*T)
		var whole T
		if err := ev.Payload(&whole); err != nil {
			t.Fatal(err)
		}
		clear(&whole)
		if !reflect.DeepEqual(*got, whole) {
			t.Errorf("decoded %+v, want the whole payload without %s: %+v", *got, without, whole)
		}
	})
}
