package queue

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/eventlog/event"

	"github.com/nats-io/nats.go/jetstream"
)

// checkStreams asserts the configuration every Drover stream must have on
// the server, for the given (defaulted) options.
func checkStreams(t *testing.T, js jetstream.JetStream, o StreamOptions) {
	t.Helper()
	o = o.WithDefaults()

	ev := streamInfo(t, js, EventsStream).Config
	if !slices.Equal(ev.Subjects, []string{"drover.events.>"}) ||
		ev.Storage != jetstream.FileStorage || ev.Retention != jetstream.LimitsPolicy ||
		ev.Duplicates != o.DedupWindow || ev.MaxAge != 0 || ev.MaxMsgs > 0 || ev.MaxBytes > 0 ||
		ev.Replicas != o.Replicas || ev.MaxMsgSize != 1<<20 {
		t.Errorf("EVENTS: must keep every event on file with a %s dedup window, got %+v", o.DedupWindow, ev)
	}

	at := streamInfo(t, js, AttemptsStream).Config
	if !slices.Equal(at.Subjects, []string{"drover.attempts.>"}) ||
		at.Storage != jetstream.FileStorage || at.Retention != jetstream.WorkQueuePolicy ||
		at.Duplicates != o.DedupWindow || at.MaxAge != 0 {
		t.Errorf("ATTEMPTS: must be a file work queue with a %s dedup window, got %+v", o.DedupWindow, at)
	}

	out := streamInfo(t, js, OutputStream).Config
	if !slices.Equal(out.Subjects, []string{"drover.output.>"}) ||
		out.Storage != jetstream.FileStorage || out.Retention != jetstream.LimitsPolicy ||
		out.MaxAge != o.OutputMaxAge || out.MaxBytes != o.OutputMaxBytes || out.Discard != jetstream.DiscardOld {
		t.Errorf("OUTPUT: must be bounded by %s and %d bytes, discarding old, got %+v", o.OutputMaxAge, o.OutputMaxBytes, out)
	}
	if want := map[bool]jetstream.PersistModeType{true: jetstream.AsyncPersistMode, false: jetstream.DefaultPersistMode}[o.Replicas == 1]; out.PersistMode != want {
		t.Errorf("OUTPUT: persist mode %v with %d replicas, want %v", out.PersistMode, o.Replicas, want)
	}
	for _, name := range []string{EventsStream, AttemptsStream, DeadLetterStream} {
		if pm := streamInfo(t, js, name).Config.PersistMode; pm != jetstream.DefaultPersistMode {
			t.Errorf("%s: persist mode %v: every acknowledged write must be on disk first", name, pm)
		}
	}

	dl := streamInfo(t, js, DeadLetterStream).Config
	if !slices.Equal(dl.Subjects, []string{"drover.deadletter.>"}) ||
		dl.Storage != jetstream.FileStorage || dl.Retention != jetstream.LimitsPolicy || dl.MaxAge != 30*24*time.Hour {
		t.Errorf("DEADLETTER: got %+v", dl)
	}

	kv, err := js.KeyValue(testCtx(t), ClaimsBucket)
	if err != nil {
		t.Fatalf("claims bucket: %v", err)
	}
	st, err := kv.Status(testCtx(t))
	if err != nil {
		t.Fatalf("claims bucket status: %v", err)
	}
	if st.History() != 1 || st.TTL() != 7*24*time.Hour || st.BackingStore() != "JetStream" {
		t.Errorf("claims bucket: history %d ttl %s store %s", st.History(), st.TTL(), st.BackingStore())
	}
	if kst := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config; kst.Storage != jetstream.FileStorage {
		t.Errorf("claims bucket storage %v, want file", kst.Storage)
	}
}

func TestEnsureIsIdempotent(t *testing.T) {
	t.Parallel()
	ns := startServer(t)
	_, js := connect(t, ns)
	ctx := testCtx(t)

	if err := Ensure(ctx, js, StreamOptions{}); err != nil {
		t.Fatalf("first Ensure: %v", err)
	}
	checkStreams(t, js, StreamOptions{})

	ev, _ := event.New("ev-1", event.FlowSubmitted, time.Now(), "f1", "", "", 0, nil)
	if _, err := PublishEvent(ctx, js, ev); err != nil {
		t.Fatal(err)
	}
	claims := claimsFor(t, js, nil)
	if _, err := claims.Acquire(ctx, "f1_t1_1", "w1"); err != nil {
		t.Fatal(err)
	}

	if err := Ensure(ctx, js, StreamOptions{}); err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	checkStreams(t, js, StreamOptions{})
	if n := streamMsgs(t, js, EventsStream); n != 1 {
		t.Errorf("a second Ensure lost events: %d stored, want 1", n)
	}
	if _, err := claims.Acquire(ctx, "f1_t1_1", "w2"); !errors.Is(err, ErrHeld) {
		t.Errorf("a second Ensure lost the claims: Acquire = %v, want ErrHeld", err)
	}
}

func TestEnsureOptions(t *testing.T) {
	t.Parallel()
	ns := startServer(t)
	_, js := connect(t, ns)
	o := StreamOptions{DedupWindow: time.Minute, OutputMaxAge: time.Hour, OutputMaxBytes: 1 << 20}
	if err := Ensure(testCtx(t), js, o); err != nil {
		t.Fatal(err)
	}
	checkStreams(t, js, o)
}

func TestEnsureRepairsDrift(t *testing.T) {
	t.Parallel()
	_, js := setup(t)
	ctx := testCtx(t)

	// Someone edits the streams and the bucket by hand.
	drifted := func(name string, edit func(*jetstream.StreamConfig)) {
		cfg := streamInfo(t, js, name).Config
		edit(&cfg)
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatalf("drift %s: %v", name, err)
		}
	}
	drifted(EventsStream, func(c *jetstream.StreamConfig) {
		c.Duplicates = 5 * time.Second
		c.MaxAge = time.Hour // events would expire
		c.Description = "edited"
	})
	drifted(OutputStream, func(c *jetstream.StreamConfig) { c.MaxBytes = -1; c.MaxAge = 0 }) // unbounded
	if _, err := js.UpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: ClaimsBucket, History: 5, TTL: time.Minute, Storage: jetstream.FileStorage,
	}); err != nil {
		t.Fatalf("drift bucket: %v", err)
	}
	// And deletes one stream.
	if err := js.DeleteStream(ctx, DeadLetterStream); err != nil {
		t.Fatal(err)
	}

	if err := Ensure(ctx, js, StreamOptions{}); err != nil {
		t.Fatalf("Ensure over drifted config: %v", err)
	}
	checkStreams(t, js, StreamOptions{})
	if d := streamInfo(t, js, EventsStream).Config.Description; d == "edited" {
		t.Errorf("description not restored")
	}
}

// TestEnsureKeepsAnOlderOutputStream: an OUTPUT stream made before it was
// written asynchronously keeps its persist mode, which JetStream cannot
// change, and Ensure still brings the rest of its configuration in line.
func TestEnsureKeepsAnOlderOutputStream(t *testing.T) {
	t.Parallel()
	ns := startServer(t)
	_, js := connect(t, ns)
	ctx := testCtx(t)
	var older jetstream.StreamConfig
	for _, c := range StreamConfigs(StreamOptions{}) {
		if c.Name == OutputStream {
			older = c
		}
	}
	older.PersistMode, older.MaxAge = jetstream.DefaultPersistMode, 0
	if _, err := js.CreateStream(ctx, older); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(ctx, js, StreamOptions{}); err != nil {
		t.Fatalf("Ensure over an older OUTPUT stream: %v", err)
	}
	out := streamInfo(t, js, OutputStream).Config
	if out.PersistMode != jetstream.DefaultPersistMode || out.MaxAge != 7*24*time.Hour {
		t.Errorf("OUTPUT: persist mode %v (want kept), max age %s (want repaired)", out.PersistMode, out.MaxAge)
	}
}
