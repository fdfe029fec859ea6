package adapter

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/supervise"
	"github.com/drover-dev/drover/internal/transcript"
)

func TestStopOn(t *testing.T) {
	rate := &transcript.Failure{Class: drovertype.ClassRateLimited, Status: 429, Retryable: true}
	auth := &transcript.Failure{Class: drovertype.ClassAuthFailed, Status: 401}
	server := &transcript.Failure{Class: drovertype.ClassRuntimeError, Status: 500, Retryable: true}
	for _, tc := range []struct {
		v    transcript.Verdict
		want Stop
	}{
		{transcript.Verdict{}, KeepRunning},
		{transcript.Verdict{Failure: auth, Retrying: true}, StopAfterRetries},
		{transcript.Verdict{Failure: auth}, StopNow},
		{transcript.Verdict{Failure: rate, Retrying: true}, StopAfterRetries},
		{transcript.Verdict{Failure: rate}, StopNow},
		{transcript.Verdict{Failure: server, Retrying: true}, KeepRunning},
		{transcript.Verdict{Failure: server}, KeepRunning},
	} {
		if got := StopOn(tc.v); got != tc.want {
			t.Errorf("StopOn(%+v) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// A CLI stopped by its output reports the output's class and wait, not a
// crash, whatever its exit; one that exited before the stop landed is
// classified as usual.
func TestClassifyStoppedByOutput(t *testing.T) {
	f := &transcript.Failure{Class: drovertype.ClassRateLimited, Status: 429, Message: "Resource has been exhausted",
		Retryable: true, RetryAfter: 2 * time.Second}
	res := &supervise.Result{Outcome: supervise.Stopped, ExitCode: 0, StopCause: &StoppedByOutput{Failure: f, Retrying: 15 * time.Second}}
	e := Classify(res, &transcript.Summary{})
	if e == nil || e.Class != drovertype.ClassRateLimited || !e.Recoverable || e.Status != 429 || e.RetryAfter != 2*time.Second ||
		!strings.Contains(e.Message, "Resource has been exhausted") || !strings.Contains(e.Message, "after 15s of its own retries") {
		t.Errorf("Classify = %+v", e)
	}
	auth := &transcript.Failure{Class: drovertype.ClassAuthFailed, Status: 401, Message: "api_retry 1/10: 401 authentication_failed"}
	res = &supervise.Result{Outcome: supervise.Stopped, ExitCode: 143, StopCause: &StoppedByOutput{Failure: auth}}
	if e := Classify(res, nil); e == nil || e.Class != drovertype.ClassAuthFailed || e.Recoverable || !strings.Contains(e.Message, "at its first fatal error") {
		t.Errorf("Classify = %+v", e)
	}
	// Another stop cause is still a crash.
	res = &supervise.Result{Outcome: supervise.Stopped, StopCause: supervise.ErrStopped}
	if e := Classify(res, nil); e == nil || e.Class != drovertype.ClassCrashed {
		t.Errorf("Classify = %+v", e)
	}
}
