package github

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
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// FuzzHook: Verify accepts exactly the signature GitHub would send, and
// Decode never panics and names a repository for what it does not ignore.
func FuzzHook(f *testing.F) {
	review := []byte(`{"action":"submitted","repository":{"full_name":"acme/app"},"pull_request":{"number":1,"head":{"ref":"b","sha":"c"}},"review":{"id":1,"state":"changes_requested"}}`)
	f.Add("pull_request_review", review, []byte("s"), sign(review, []byte("s")))
	f.Add("check_run", []byte(`{"check_run":{"head_sha":"c","pull_requests":[{"number":2}]},"repository":{"full_name":"a/b"}}`), []byte("s"), "sha256=00")
	f.Add("status", []byte(`{"sha":"c","repository":{}}`), []byte(""), "")
	f.Add("pull_request", []byte(`[]`), []byte("k"), "sha1=abc")
	f.Fuzz(func(t *testing.T, event string, body, secret []byte, sig string) {
		h := http.Header{"X-Github-Event": {event}, "X-Github-Delivery": {"d"}, "X-Hub-Signature-256": {sig}}
		err := Hook{}.Verify(h, body, secret)
		// hex decoding is case-insensitive: an upper-case digest is the same one.
		want := len(secret) > 0 && strings.HasPrefix(sig, "sha256=") && "sha256="+strings.ToLower(sig[7:]) == sign(body, secret)
		if (err == nil) != want {
			t.Fatalf("Verify(%q) = %v; want accepted %v", sig, err, want)
		}
		if err != nil && !errors.Is(err, forge.ErrUnsigned) && !errors.Is(err, forge.ErrBadSignature) {
			t.Fatalf("Verify's refusal is not a sentinel: %v", err)
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
