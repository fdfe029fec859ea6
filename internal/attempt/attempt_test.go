package attempt

import (
	"strings"
	"testing"
)

func TestHeadTail(t *testing.T) {
	if got := headTail("short", 10); got != "short" {
		t.Errorf("short: %q", got)
	}
	s := "HEAD" + strings.Repeat("x", 100) + "TAIL"
	got := headTail(s, 20)
	if !strings.HasPrefix(got, "HEAD") || !strings.HasSuffix(got, "TAIL") || !strings.Contains(got, "88 bytes omitted") {
		t.Errorf("got %q", got)
	}
}
