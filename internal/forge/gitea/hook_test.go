package gitea

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-dev/drover/internal/forge"
)

func sign(body, secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// FuzzHook: Verify accepts exactly the signature Gitea would send, and
// Decode never panics and names a repository for what it does not ignore.
func FuzzHook(f *testing.F) {
	review := []byte(`{"action":"reviewed","number":1,"repository":{"full_name":"acme/app"},"pull_request":{"number":1,"head":{"ref":"b","sha":"c"}}}`)
	f.Add("pull_request_review_rejected", review, []byte("s"), sign(review, []byte("s")))
	f.Add("status", []byte(`{"sha":"c","repository":{"full_name":"a/b"}}`), []byte("s"), "zz")
	f.Add("pull_request", []byte(`{"repository":null}`), []byte(""), "")
	f.Fuzz(func(t *testing.T, event string, body, secret []byte, sig string) {
		h := http.Header{"X-Gitea-Event": {event}, "X-Gitea-Delivery": {"d"}, "X-Gitea-Signature": {sig}}
		err := Hook{}.Verify(h, body, secret)
		// hex decoding is case-insensitive: an upper-case digest is the same one.
		want := len(secret) > 0 && sig != "" && strings.ToLower(sig) == sign(body, secret)
		if (err == nil) != want {
			t.Fatalf("Verify(%q) = %v; want accepted %v", sig, err, want)
		}
		d, err := Hook{}.Decode(h, body)
		if err != nil {
			if !errors.Is(err, forge.ErrBadDelivery) {
				t.Fatalf("Decode's error is not ErrBadDelivery: %v", err)
			}
			return
		}
		if !d.Ignored && d.Repo == "" {
			t.Fatalf("a delivery about no repository: %+v", d)
		}
	})
}
