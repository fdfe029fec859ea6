package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// What the daemons wait for at start (docs/operations.md#start-order): the
// controller for JetStream, then its Ensure; workers for the buckets the
// controller creates. Each check is one try; package startup retries it.

// ErrNotCreated is wrapped by CheckBuckets' error for a bucket that does not
// exist yet: only the controller creates Drover's streams and buckets.
var ErrNotCreated = errors.New("queue: not created yet (the controller creates Drover's streams and buckets)")

// CheckJetStream asks for the account's JetStream information: nil once
// JetStream answers, which in a cluster means it has elected its leader.
func CheckJetStream(ctx context.Context, js jetstream.JetStream) error {
	_, err := js.AccountInfo(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return fmt.Errorf("queue: JetStream is not enabled on the server (nats-server -js, or a jetstream block in its configuration): %w", err)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return fmt.Errorf("queue: JetStream is not enabled for this NATS account (the account's jetstream limits): %w", err)
	}
	return fmt.Errorf("queue: JetStream: %w", err)
}

// CheckBuckets opens the buckets the workers use — claims, the worker
// registry, artifacts, large jobs (if there) — the way a worker's permissions allow (stream info
// on each; docs/security.md): nil once each exists and answers. A bucket
// not there yet is an error wrapping ErrNotCreated. Ensure creates the
// streams before the buckets, so the buckets are there last.
func CheckBuckets(ctx context.Context, js jetstream.JetStream) error {
	for _, b := range []string{ClaimsBucket, WorkersBucket} {
		if _, err := js.KeyValue(ctx, b); err != nil {
			return bucketError(b, err)
		}
	}
	if _, err := js.ObjectStore(ctx, ArtifactsBucket); err != nil {
		return bucketError(ArtifactsBucket, err)
	}
	// The jobs store may be missing, not unreadable: a controller older
	// than it never queues a job there, and workers are upgraded first.
	if _, err := js.ObjectStore(ctx, JobsBucket); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return bucketError(JobsBucket, err)
	}
	return nil
}

func bucketError(bucket string, err error) error {
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("bucket %s: %w", bucket, ErrNotCreated)
	}
	return fmt.Errorf("queue: bucket %s: %w", bucket, err)
}

// configErrors are the JetStream refusals of Ensure's layout that no wait
// fixes, by error code, with what an operator should look at. Any other
// error — no leader yet, no peers to place replicas on while a cluster
// forms, resources short — may pass, and the controller waits.
var configErrors = map[jetstream.ErrorCode]string{
	10074: "nats.replicas is above 1 but the NATS server is not clustered",
	10061: "nats.replicas differs from the streams' replicas, which this server cannot change",
	10065: "another stream of this NATS account takes Drover's subjects",
	10058: "a stream of this NATS account has one of Drover's names but another configuration",
	10052: "the NATS server refuses the stream configuration",
}

// ConfigError is JetStream refusing Drover's layout (Ensure) for a reason
// that waiting does not fix; the controller exits on it.
type ConfigError struct {
	// Why says what to look at.
	Why string
	Err error
}

func (e *ConfigError) Error() string { return e.Err.Error() + " (" + e.Why + ")" }
func (e *ConfigError) Unwrap() error { return e.Err }

// ensureError names what Ensure failed to create, as a *ConfigError when
// JetStream refused it for good.
func ensureError(what string, err error) error {
	err = fmt.Errorf("queue: ensure %s: %w", what, err)
	var api *jetstream.APIError
	if errors.As(err, &api) {
		if why, ok := configErrors[api.ErrorCode]; ok {
			return &ConfigError{Why: why, Err: err}
		}
	}
	return err
}
