package eventlog

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestPayloadTypes: every type the fold reads is decoded ahead into the
// type its handler reads, and the handler takes it, so the fold does not
// keep a second reference to it nor decode it twice.
func TestPayloadTypes(t *testing.T) {
	types := []Type{
		FlowSubmitted, FlowTasksSubmitted, FlowCompleted, AttemptScheduled, AttemptClaimed,
		AdapterInitialized, PrepareCompleted, RuntimeStarted, RuntimeExited, FileModified,
		DiffComputed, CheckpointCommitCreated, RuntimeTerminated, AttemptReported,
		RuntimeErrorClassified, TaskFailedEvent, VerificationCompleted, RuntimeRecoveryScheduled,
		CancelRequested, TaskCancelledEvent, FlowPaused, FlowResumed, TaskRetryRequested,
		AttemptAbandoned, AttemptLost, IntegrationScheduled, FlowIntegrated,
	}
	for _, typ := range types {
		ev, err := New("e1", typ, time.Now(), "f", "a", "f-a-1", 1, struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := ev.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := decodeOnePass(raw); !ok {
			t.Errorf("%s: an event as Drover writes it is not decoded in one pass", typ)
		}
		d := DecodeForFold(raw)
		if d.err != nil {
			t.Fatalf("%s: %v", typ, d.err)
		}
		if d.ev.payload == nil {
			t.Errorf("%s: not decoded ahead", typ)
			continue
		}
		err = NewState().Apply(1, d.ev)
		if errors.Is(err, errPayloadType) {
			t.Errorf("%s: %v", typ, err)
		}
		if d.ev.payload != nil {
			t.Errorf("%s: the handler did not take the payload decoded ahead", typ)
		}
	}
	// A payload that does not decode is poison either way, for the same reason.
	raw := []byte(`{"v":1,"id":"e1","type":"attempt_reported","flow":"f","attempt":"x","data":{"success":"yes"}}`)
	ahead := NewState().applyDecoded(7, DecodeForFold(raw))
	st := NewState()
	now := st.applyRaw(7, raw)
	if ahead != nil || now != nil {
		t.Fatal("an undecodable payload was folded")
	}
	other := NewState()
	other.applyDecoded(7, DecodeForFold(raw))
	if got, want := other.Poisons[7].Reason, st.Poisons[7].Reason; got != want || got == "" {
		t.Errorf("poison reason decoded ahead %q, decoded by the handler %q", got, want)
	}
}

// BenchmarkDecodeForFold compares the fold's one-pass decoding with Decode
// and Payload, on a report carrying a real Claude Code transcript as its
// stdout tail (most of the fold's bytes) and on a claim (most of its events).
func BenchmarkDecodeForFold(b *testing.B) {
	transcript, err := os.ReadFile("../../testdata/transcripts/claude/success/stdout.txt")
	if err != nil {
		b.Fatal(err)
	}
	events := map[string]struct {
		typ  Type
		data any
	}{
		"report": {AttemptReported, Report{Success: true, Branch: "drover/f/a/1", Commit: strings.Repeat("a", 40),
			StdoutTail: string(transcript), FilesCreated: []string{"pkg/new.go"}}},
		"claim": {AttemptClaimed, AttemptClaimedData{Worker: "worker-1"}},
	}
	for name, e := range events {
		ev, err := New("f-a-1-"+string(e.typ), e.typ, time.Now(), "f", "a", "f-a-1", 1, e.data)
		if err != nil {
			b.Fatal(err)
		}
		raw, err := ev.Encode()
		if err != nil {
			b.Fatal(err)
		}
		for _, way := range []struct {
			name   string
			decode func([]byte) Decoded
		}{{"one-pass", DecodeForFold}, {"two-pass", decodeTwoPass}} {
			b.Run(name+"/"+way.name, func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					if d := way.decode(raw); d.err != nil || d.ev.payload == nil {
						b.Fatalf("not decoded: %v", d.err)
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
		t.Run(c.name, func(t *testing.T) {
			raw := []byte(head + c.data + "}")
			checkDecodeForFold(t, raw)
			if _, ok := decodeOnePass(raw); ok != c.onePass {
				t.Errorf("decoded in one pass: %v, want %v", ok, c.onePass)
			}
			d := DecodeForFold(raw)
			if poison := d.err != nil || d.ev.payloadErr != nil; poison != c.poison {
				t.Fatalf("poison: %v (%v, %v), want %v", poison, d.err, d.ev.payloadErr, c.poison)
			}
			if c.poison {
				return
			}
			r := d.ev.payload.(*Report)
			var whole Report
			if err := d.ev.Payload(&whole); err != nil {
				t.Fatal(err)
			}
			whole.StdoutTail = ""
			if !reflect.DeepEqual(*r, whole) {
				t.Errorf("decoded %+v, want the whole report without its stdout tail: %+v", *r, whole)
			}
		})
	}
}
