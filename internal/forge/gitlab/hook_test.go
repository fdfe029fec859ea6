package gitlab

import (
	"errors"
	"net/http"
	"testing"

	"github.com/drover-dev/drover/internal/forge"
)

// FuzzHook: Verify accepts exactly the configured token, and Decode never
// panics and names a project for what it does not ignore.
func FuzzHook(f *testing.F) {
	f.Add("Merge Request Hook", []byte(`{"object_kind":"merge_request","project":{"path_with_namespace":"g/a"},"object_attributes":{"iid":1,"source_branch":"b","last_commit":{"id":"c"}}}`), []byte("s"), "s")
	f.Add("Pipeline Hook", []byte(`{"object_kind":"pipeline","project":{},"object_attributes":{"sha":"c"}}`), []byte("s"), "t")
	f.Add("Note Hook", []byte(`{"object_kind":"note","object_attributes":{"noteable_type":"MergeRequest"}}`), []byte(""), "")
	f.Add("Job Hook", []byte(`{"object_kind":"build"}`), []byte("k"), "k")
	f.Fuzz(func(t *testing.T, event string, body, secret []byte, tok string) {
		h := http.Header{"X-Gitlab-Event": {event}, "X-Gitlab-Event-Uuid": {"d"}, "X-Gitlab-Token": {tok}}
		err := Hook{}.Verify(h, body, secret)
		want := len(secret) > 0 && tok == string(secret)
		if (err == nil) != want {
			t.Fatalf("Verify(%q, secret %q) = %v; want accepted %v", tok, secret, err, want)
		}
		d, err := Hook{}.Decode(h, body)
		if err != nil {
			if !errors.Is(err, forge.ErrBadDelivery) {
				t.Fatalf("Decode's error is not ErrBadDelivery: %v", err)
			}
			return
		}
		if !d.Ignored && d.Repo == "" {
			t.Fatalf("a delivery about no project: %+v", d)
		}
	})
}
