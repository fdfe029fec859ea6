package fleet

import (
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/queue"
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	js := setup(t)
	ctx := testCtx(t)
	if ws, err := Workers(ctx, js); err != nil || len(ws) != 0 {
		t.Fatalf("empty fleet: %v %v", ws, err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, id := range []string{"w2", "w1"} {
		r := &Registration{ID: id, Host: "h", Pool: "default", Slots: 2, Seen: now,
			Runtimes: []RuntimeHealth{{Name: "demo", Healthy: true, Version: "1.0"}, {Name: "codex", Error: "not found"}}}
		if err := Register(ctx, js, r); err != nil {
			t.Fatal(err)
		}
	}
	// Renewing overwrites.
	if err := Register(ctx, js, &Registration{ID: "w1", Pool: "default", Slots: 4, Busy: 3, Seen: now}); err != nil {
		t.Fatal(err)
	}
	ws, err := Workers(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].ID != "w1" || ws[0].Busy != 3 || ws[1].ID != "w2" || len(ws[1].Runtimes) != 2 || !ws[1].Runtimes[0].Healthy {
		t.Fatalf("fleet: %+v", ws)
	}
	// A registration that does not decode does not hide the others.
	kv, err := js.KeyValue(ctx, queue.WorkersBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "junk", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if err := Deregister(ctx, js, "w2"); err != nil {
		t.Fatal(err)
	}
	if err := Deregister(ctx, js, "never-registered"); err != nil {
		t.Errorf("deregistering an unknown worker: %v", err)
	}
	ws, err = Workers(ctx, js)
	if err != nil || len(ws) != 1 || ws[0].ID != "w1" {
		t.Fatalf("after deregister: %+v %v", ws, err)
	}
	stream, err := js.Stream(ctx, "KV_"+queue.WorkersBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxAge != RegistrationTTL {
		t.Errorf("registrations TTL %s, want %s", info.Config.MaxAge, RegistrationTTL)
	}
}

// TestControllerRegistry: controllers register, renew, list by id and
// leave; an entry under another controller's key, or junk, hides nobody.
func TestControllerRegistry(t *testing.T) {
	t.Parallel()
	js := setup(t)
	ctx := testCtx(t)
	for _, c := range []*Controller{{ID: "ctl-b", Role: RoleStandby, Epoch: 2}, {ID: "ctl-a", Role: RoleLeader, Epoch: 2, Applied: 40}} {
		if err := RegisterController(ctx, js, c); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := js.KeyValue(ctx, queue.ControllersBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "junk", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "ctl-z", []byte(`{"id":"ctl-a","role":"leader"}`)); err != nil {
		t.Fatal(err)
	}
	cs, err := Controllers(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].ID != "ctl-a" || cs[0].Applied != 40 || cs[1].ID != "ctl-b" {
		t.Fatalf("controllers: %+v", cs)
	}
	if err := DeregisterController(ctx, js, "ctl-a"); err != nil {
		t.Fatal(err)
	}
	if err := DeregisterController(ctx, js, "never"); err != nil {
		t.Fatal(err)
	}
	if cs, err := Controllers(ctx, js); err != nil || len(cs) != 1 || cs[0].ID != "ctl-b" {
		t.Fatalf("after ctl-a left: %+v %v", cs, err)
	}
}
