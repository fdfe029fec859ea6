package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestOffWhenListenEmpty(t *testing.T) {
	s, err := Start("", nil)
	if err != nil || s != nil {
		t.Fatalf("Start(\"\") = %v, %v; want nil, nil", s, err)
	}
	if s.Addr() != "" || s.Shutdown(context.Background()) != nil {
		t.Fatal("nil server should be a no-op")
	}
}

func TestServer(t *testing.T) {
	s, err := Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	base := "http://" + s.Addr()

	c, err := Meter("test").Int64Counter("drover_test_things_total")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 3)
	code, body := get(t, base+"/metrics")
	if code != 200 || !strings.Contains(body, "drover_test_things_total 3") {
		t.Fatalf("/metrics = %d\n%s", code, body)
	}

	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, _ := get(t, base+"/debug/pprof/"); code != 404 {
		t.Fatalf("/debug/pprof/ without WithPprof = %d, want 404", code)
	}

	if code, _ := get(t, base+"/readyz"); code != 503 {
		t.Fatalf("/readyz with no checks = %d, want 503", code)
	}
	rmOK := AddCheck("nats", func(context.Context) error { return nil })
	defer rmOK()
	if code, body := get(t, base+"/readyz"); code != 200 || !strings.Contains(body, "ok nats") {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	rmBad := AddCheck("store", func(context.Context) error { return errors.New("closed") })
	code, body = get(t, base+"/readyz")
	if code != 503 || !strings.Contains(body, "fail store: closed") {
		t.Fatalf("/readyz with failing check = %d %q", code, body)
	}
	rmBad()
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz after removing failing check = %d", code)
	}
}

func TestPprofOptIn(t *testing.T) {
	s, err := Start("127.0.0.1:0", nil, WithPprof(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	base := "http://" + s.Addr()
	if code, body := get(t, base+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/ = %d\n%s", code, body)
	}
	if code, body := get(t, base+"/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile") {
		t.Fatalf("/debug/pprof/heap = %d\n%.200s", code, body)
	}
}

func TestMount(t *testing.T) {
	s, err := Start("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	base := "http://" + s.Addr()
	if code, _ := get(t, base+"/ui/"); code != 404 {
		t.Fatalf("/ui/ before mounting = %d", code)
	}
	unmount := s.Mount("/ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ui "+r.URL.Path) }))
	s.Mount("/ui/deep/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "deep") }))
	if code, body := get(t, base+"/ui/flows/x"); code != 200 || body != "ui /ui/flows/x" {
		t.Fatalf("/ui/flows/x = %d %q", code, body)
	}
	if _, body := get(t, base+"/ui/deep/x"); body != "deep" {
		t.Fatalf("the longest prefix should win: %q", body)
	}
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	if code, _ := get(t, base+"/nothing"); code != 404 {
		t.Fatalf("/nothing = %d", code)
	}
	unmount()
	if code, _ := get(t, base+"/ui/flows/x"); code != 404 {
		t.Fatalf("after unmounting = %d", code)
	}
}
