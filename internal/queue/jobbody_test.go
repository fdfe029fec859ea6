package queue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/eventlog/event"
)

// integrationJob is the integration of a flow of n succeeded tasks: more
// than a message from about 8,000.
func integrationJob(flowID string, n int) *Job {
	j := &Job{
		Kind: drovertype.JobIntegrate, Attempt: drovertype.IntegrationID(flowID, 1), Flow: flowID, N: 1,
		Pool: "default", Runtime: "claude", Repo: "https://example.com/r.git", Base: "main",
		Branch: drovertype.IntegrationBranch(flowID, 1),
	}
	for i := range n {
		task := fmt.Sprintf("t%06d", i)
		sum := sha256.Sum256([]byte(task))
		j.Merge = append(j.Merge, event.DepResult{Task: task, Branch: drovertype.AttemptBranch(flowID, task, 1), Commit: hex.EncodeToString(sum[:20])})
	}
	return j
}

// TestLargeJobTravelsAsObject: a job over a message's size is queued as a
// message naming its body in the jobs store, whichever way the controller
// publishes it, and a worker reads it back whole. A republished decision
// queues it once.
func TestLargeJobTravelsAsObject(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := attemptConsumer(t, js, "default", "claude", 0)

	large := integrationJob("big", 20000)
	publishJob(t, js, large)
	b := NewBatch(js)
	b.Job(ctx, large, nil) // the same decision, republished after a crash
	b.Job(ctx, integrationJob("small", 10), nil)
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := streamMsgs(t, js, AttemptsStream); n != 2 {
		t.Fatalf("%d jobs queued, want 2", n)
	}
	m := next(t, c, 5*time.Second)
	name := m.Headers().Get(JobBodyHeader)
	if !strings.HasPrefix(name, large.Attempt+".") || len(m.Data()) != 0 {
		t.Fatalf("large job queued with %d bytes, body header %q", len(m.Data()), name)
	}
	got, err := ReadJob(ctx, js, m.Headers(), m.Data())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, large) {
		t.Errorf("large job read back differs: %d merges, want %d", len(got.Merge), len(large.Merge))
	}
	small := next(t, c, 5*time.Second)
	if h := small.Headers().Get(JobBodyHeader); h != "" || len(small.Data()) == 0 {
		t.Errorf("small job queued with %d bytes, body header %q: want the job in the message", len(small.Data()), h)
	}
	if j, err := ReadJob(ctx, js, small.Headers(), small.Data()); err != nil || j.Attempt != drovertype.IntegrationID("small", 1) {
		t.Errorf("small job read back as %v, %v", j, err)
	}
	store, err := js.ObjectStore(ctx, JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if infos, err := store.List(ctx); err != nil || len(infos) != 1 {
		t.Errorf("jobs store holds %d objects (%v), want the large job's one", len(infos), err)
	}
}

// TestJobBodyForgeries: a body that is not the one its message names, or a
// name that does not bind it to its job, is poison (ErrBadJob); a read that
// failed on the way is not.
func TestJobBodyForgeries(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)
	c := attemptConsumer(t, js, "default", "claude", 0)
	store, err := js.ObjectStore(ctx, JobsBucket)
	if err != nil {
		t.Fatal(err)
	}
	large := integrationJob("big", 20000)
	publishJob(t, js, large)
	name := next(t, c, 5*time.Second).Headers().Get(JobBodyHeader)
	other := integrationJob("big", 20001)
	otherData, err := encodeJob(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutBytes(ctx, "big_integrate_1.x", otherData); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(otherData)
	if _, err := store.PutBytes(ctx, "other_integrate_1."+hex.EncodeToString(sum[:]), otherData); err != nil {
		t.Fatal(err)
	}
	digest := name[strings.IndexByte(name, '.'):]
	for what, header := range map[string]string{
		"a name without a digest":          "big_integrate_1",
		"a digest that is not one":         "big_integrate_1.x",
		"a body of another job's name":     "other_integrate_1." + hex.EncodeToString(sum[:]),
		"a name with no such body":         "big_integrate_2" + digest,
		"a body not of its name's digest":  "",
		"a body in the message and a name": name,
	} {
		msg := &nats.Msg{Subject: AttemptSubject("default", "claude"), Header: nats.Header{}}
		switch what {
		case "a body not of its name's digest":
			// The controller's object, overwritten with another job.
			if _, err := store.PutBytes(ctx, name, otherData); err != nil {
				t.Fatal(err)
			}
			header = name
		case "a body in the message and a name":
			msg.Data = []byte("{}")
		}
		msg.Header.Set(JobBodyHeader, header)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
		m := next(t, c, 5*time.Second)
		if _, err := ReadJob(ctx, js, m.Headers(), m.Data()); !errors.Is(err, ErrBadJob) {
			t.Errorf("%s: %v, want ErrBadJob", what, err)
		}
	}

	// A body over MaxJobSize, named by its own digest, is refused before
	// it is read.
	huge := bytes.Repeat([]byte("x"), MaxJobSize+1)
	hugeSum := sha256.Sum256(huge)
	hugeName := "big_integrate_1." + hex.EncodeToString(hugeSum[:])
	if _, err := store.PutBytes(ctx, hugeName, huge); err != nil {
		t.Fatal(err)
	}
	hugeMsg := &nats.Msg{Subject: AttemptSubject("default", "claude"), Header: nats.Header{}}
	hugeMsg.Header.Set(JobBodyHeader, hugeName)
	if _, err := js.PublishMsg(ctx, hugeMsg); err != nil {
		t.Fatal(err)
	}
	m := next(t, c, 5*time.Second)
	if _, err := ReadJob(ctx, js, m.Headers(), m.Data()); !errors.Is(err, ErrBadJob) || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a body of %d bytes: %v, want ErrBadJob for its size", len(huge), err)
	}

	// A read cut short is not the job's fault.
	msg := &nats.Msg{Subject: AttemptSubject("default", "claude"), Header: nats.Header{}}
	msg.Header.Set(JobBodyHeader, name)
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	m = next(t, c, 5*time.Second)
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ReadJob(done, js, m.Headers(), m.Data()); err == nil || errors.Is(err, ErrBadJob) {
		t.Errorf("read with its context ended: %v, want an error that is not ErrBadJob", err)
	}
}
