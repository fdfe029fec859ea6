package main

import (
	"errors"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/natsconn"
)

// TestSetSync: the nats-server's sync interval is read as
// nats.sync_interval is, and anything else is refused as invalid config.
func TestSetSync(t *testing.T) {
	for _, tc := range []struct {
		in       string
		always   bool
		interval time.Duration
	}{{"always", true, 0}, {"default", false, 0}, {"", false, 0}, {"250ms", false, 250 * time.Millisecond}} {
		var o natsconn.EmbeddedOptions
		if err := setSync(&o, tc.in); err != nil || o.SyncAlways != tc.always || o.SyncInterval != tc.interval {
			t.Errorf("%q: %+v, %v", tc.in, o, err)
		}
	}
	for _, bad := range []string{"bogus", "0s", "-1s", "Always", "1s; rm -rf /", "9999999999999999999h"} {
		if err := setSync(&natsconn.EmbeddedOptions{}, bad); !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%q: %v, want invalid config", bad, err)
		}
	}
}
