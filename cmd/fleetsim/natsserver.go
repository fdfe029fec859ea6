package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/config"
	"github.com/drover-dev/drover/internal/natsconn"
)

// newNATSServer is the hidden command fleetsim starts its nats-server
// with: the server the controller embeds (natsconn.StartEmbedded), in a
// process of its own so that its CPU time is measured apart from the
// controller's, as a fleet runs NATS apart from the controller.
func newNATSServer() *cobra.Command {
	var storeDir, urlFile, sync, cpuProfile, heapProfile string
	var profileSeconds int
	cmd := &cobra.Command{
		Use:    "nats-server",
		Short:  "Run the controller's embedded nats-server on its own, on a free loopback port (fleetsim starts it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serveNATS(cmd.Context(), storeDir, urlFile, sync, profiles{cpu: cpuProfile, cpuFor: time.Duration(profileSeconds) * time.Second, heap: heapProfile})
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&storeDir, "store-dir", "", "JetStream's store dir")
	fs.StringVar(&urlFile, "url-file", "", "where to write the server's URL once it accepts clients")
	fs.StringVar(&sync, "sync-interval", "always", "as nats.sync_interval: always, default or a duration")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "on SIGUSR1, profile the server's CPU into this file")
	fs.IntVar(&profileSeconds, "profile-seconds", 120, "how long the CPU profile runs")
	fs.StringVar(&heapProfile, "heapprofile", "", "on SIGUSR2, save the server's heap profile to this file")
	_ = cmd.MarkFlagRequired("store-dir")
	_ = cmd.MarkFlagRequired("url-file")
	return cmd
}

// profiles says where the server saves its profiles when signalled.
type profiles struct {
	cpu    string // on SIGUSR1, over cpuFor
	cpuFor time.Duration
	heap   string // on SIGUSR2
}

// serveNATS runs the server until ctx ends (SIGTERM, SIGINT).
func serveNATS(ctx context.Context, storeDir, urlFile, sync string, p profiles) error {
	o := natsconn.EmbeddedOptions{StoreDir: storeDir, Port: -1}
	if err := setSync(&o, sync); err != nil {
		return err
	}
	ns, err := natsconn.StartEmbedded(o)
	if err != nil {
		return err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	tmp := urlFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(ns.ClientURL()+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, urlFile); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sig)
	for {
		var s os.Signal
		select {
		case <-ctx.Done():
			return nil
		case s = <-sig:
		}
		var err error
		switch {
		case s == syscall.SIGUSR1 && p.cpu != "":
			err = profileCPU(ctx, p.cpu, p.cpuFor)
		case s == syscall.SIGUSR2 && p.heap != "":
			err = profileHeap(p.heap)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleetsim nats-server: profile:", err)
		}
	}
}

// profileHeap saves the heap's profile to file, whole once it is there:
// fleetsim waits for the file to appear.
func profileHeap(file string) error {
	tmp := file + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	runtime.GC() // the profile's in-use figures are as of the last collection
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// profileCPU profiles this process's CPU into file for d, or until ctx ends.
func profileCPU(ctx context.Context, file string, d time.Duration) error {
	stop, err := selfProfile(file)
	if err != nil {
		return err
	}
	defer stop()
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return nil
}

// setSync sets o's fsync from a sync interval as nats.sync_interval says
// it: always, default, or a positive duration.
func setSync(o *natsconn.EmbeddedOptions, sync string) error {
	switch sync {
	case "always":
		o.SyncAlways = true
	case "default", "":
	default:
		d, err := time.ParseDuration(sync)
		if err != nil || d <= 0 {
			return fmt.Errorf("%w: the nats-server's sync interval must be always, default or a positive duration (got %q)", config.ErrInvalid, sync)
		}
		o.SyncInterval = d
	}
	return nil
}
