package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/drover-dev/drover/internal/drovertype"
	"github.com/drover-dev/drover/internal/queue"
)

// BenchmarkClaimLatency measures how long a queued job waits before a worker
// holds it, with idle workers: a controller (`controller serve`, embedded
// NATS, fsync on every write) and 2 worker processes × 1 slot serving the
// demo runtime.
//
// For each of 2,000 jobs (DROVER_BENCH_CLAIM_JOBS), one at a time, after 20
// that are not counted:
//
//  1. wait until both workers wait for a job (the consumer's pending pulls
//     = 2, nothing unacknowledged), so nothing queues;
//  2. t0: the benchmark calls queue.PublishJob, as the controller does
//     (JetStream publish, deduplicated by attempt id, acknowledged once
//     stored and fsynced);
//  3. t1: the benchmark's watch of the drover-claims KV bucket delivers the
//     claim (state running) that the worker wrote with compare-and-set —
//     the instant the worker holds the attempt. Both instants are on the
//     benchmark's monotonic clock.
//
// The job's repo is deliberately unusable, so its attempt ends right after
// the claim (PREPARE_FAILED, reported, claim finished, job acked) and the
// worker is idle again within milliseconds; what happens after the claim is
// not measured. Reported: p50_ms and p99_ms of t1 − t0 (targets ≤ 2 ms and
// ≤ 10 ms), max_ms, and publish_p50_ms, the publish's own round trip
// (included in t1 − t0).
func BenchmarkClaimLatency(b *testing.B) {
	skipShort(b)
	nJobs := envInt(b, "DROVER_BENCH_CLAIM_JOBS", 2000)
	b.Run(fmt.Sprintf("jobs=%d", nJobs), func(b *testing.B) { claimLatency(b, nJobs) })
}

func claimLatency(b *testing.B, nJobs int) {
	const warmup = 20
	c := newCluster(b, "DROVER_WORKER_RUNTIMES=demo")
	defer c.stop()
	c.addWorker("w1", 1)
	c.addWorker("w2", 1)
	c.waitIdle("demo", 2, 20*time.Millisecond)

	ctx := context.Background()
	claims, err := queue.NewClaims(ctx, c.js, 30*time.Second, nil)
	if err != nil {
		b.Fatal(err)
	}
	watch, err := claims.Watch(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = watch.Stop() }()
	type seen struct {
		at    time.Time
		claim *queue.ClaimInfo
	}
	updates := make(chan seen, 1024)
	go func() {
		defer close(updates)
		for info := range watch.Updates() {
			if info != nil {
				updates <- seen{time.Now(), info}
			}
		}
	}()
	// waitClaim returns when the attempt's claim reaches state.
	waitClaim := func(attempt, state string) time.Time {
		timeout := time.After(time.Minute)
		for {
			select {
			case u, ok := <-updates:
				if !ok {
					b.Fatal("claims watch ended")
				}
				if u.claim.Attempt == attempt && u.claim.State == state {
					return u.at
				}
			case <-timeout:
				b.Fatalf("no %s claim of %s within a minute", state, attempt)
			}
		}
	}

	var lat, pub []time.Duration
	for range b.N {
		flowID := fmt.Sprintf("claim%d", nextRun("claim"))
		for j := range nJobs + warmup {
			c.waitIdle("demo", 2, time.Millisecond)
			task := fmt.Sprintf("t%d", j)
			job := &queue.Job{Attempt: drovertype.AttemptID(flowID, task, 1), Flow: flowID, Task: task, N: 1,
				Pool: "default", Runtime: "demo", Repo: "unusable-repo", Base: "main",
				Branch: drovertype.AttemptBranch(flowID, task, 1), Prompt: "@exit 0"}
			t0 := time.Now()
			if err := queue.PublishJob(ctx, c.js, job); err != nil {
				b.Fatal(err)
			}
			published := time.Since(t0)
			t1 := waitClaim(job.Attempt, "running")
			waitClaim(job.Attempt, "finished")
			if j >= warmup {
				lat = append(lat, t1.Sub(t0))
				pub = append(pub, published)
			}
		}
	}
	slices.Sort(lat)
	slices.Sort(pub)
	b.ReportMetric(ms(percentile(lat, 50)), "p50_ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99_ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max_ms")
	b.ReportMetric(ms(percentile(pub, 50)), "publish_p50_ms")
}

// percentile returns the p-th percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
