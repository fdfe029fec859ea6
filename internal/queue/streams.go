package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/internal/eventlog/event"
)

// Stream, bucket and subject names. Subjects carry ids validated by the flow
// parser, so every token is [A-Za-z0-9_-].
const (
	EventsStream     = "DROVER_EVENTS"
	AttemptsStream   = "DROVER_ATTEMPTS"
	OutputStream     = "DROVER_OUTPUT"
	DeadLetterStream = "DROVER_DEADLETTER"
	ClaimsBucket     = "drover-claims"
	WorkersBucket    = "drover-workers"
	ArtifactsBucket  = "drover-artifacts"
	TransfersBucket  = "drover-transfers"
	// JobsBucket holds the jobs too large for a message (JobBodyHeader).
	JobsBucket = "drover-jobs"
	// LeaderBucket holds the controllers' leadership lease (package
	// leadership); ControllersBucket each controller's registration
	// (package fleet).
	LeaderBucket      = "drover-leader"
	ControllersBucket = "drover-controllers"

	// WorkersTTL is how long a worker's registration lives unrenewed.
	WorkersTTL = 2 * time.Minute
	// TransfersMaxAge is how long a large API body is kept.
	TransfersMaxAge = time.Hour
	// JobsMaxAge is how long a job too large for a message is kept: its
	// message may wait that long in the queue for a worker.
	JobsMaxAge = 30 * 24 * time.Hour
	// ControllersTTL is how long a controller's registration lives
	// unrenewed.
	ControllersTTL = time.Minute
	// leaderMarkerTTL is how long the leader bucket keeps the marker a
	// lapsed lease leaves, which shows its end to watchers.
	leaderMarkerTTL = time.Minute

	eventsPrefix     = event.SubjectPrefix
	attemptsPrefix   = "drover.attempts."
	outputPrefix     = "drover.output."
	deadLetterPrefix = "drover.deadletter."

	// APIPrefix is where the controller answers operator requests.
	APIPrefix = "drover.api"
)

// EventSubject is the subject of an event of a flow: one token for the flow,
// one for the type, so `controller events FLOW` can filter by flow.
func EventSubject(flowID, typ string) string { return event.Subject(flowID, event.Type(typ)) }

// FlowEventsFilter matches every event of one flow.
func FlowEventsFilter(flowID string) string { return eventsPrefix + flowID + ".>" }

// AttemptSubject is where jobs for a pool and runtime are queued.
func AttemptSubject(pool, runtime string) string { return attemptsPrefix + pool + "." + runtime }

// OutputSubject carries one attempt's output chunks.
func OutputSubject(flowID, attempt string) string { return outputPrefix + flowID + "." + attempt }

// cancelPrefix carries the controller's "stop this attempt" signals. They are
// core NATS messages: the controller repeats them until the attempt ends.
const cancelPrefix = "drover.control.cancel."

// CancelSubject is where the stop signal of one attempt is sent.
func CancelSubject(attempt string) string { return cancelPrefix + attempt }

// CancelSubjects matches every attempt's stop signal.
const CancelSubjects = cancelPrefix + "*"

// DeadLetterSubject is where a poison message from source is parked.
func DeadLetterSubject(source string) string { return deadLetterPrefix + source }

// StreamOptions sets what differs between deployments.
type StreamOptions struct {
	// Replicas for every stream and bucket: 1 on a single server, 3 on a
	// JetStream cluster. Defaults to 1.
	Replicas int
	// DedupWindow is how long JetStream remembers a Nats-Msg-Id. Defaults
	// to 2m: the server holds each id of the window in memory, and the
	// fold drops a later copy by its id anyway (nats.dedup_window).
	DedupWindow time.Duration
	// OutputMaxAge bounds how long output chunks are kept. Defaults to 7 days.
	OutputMaxAge time.Duration
	// OutputMaxBytes bounds the output stream. Defaults to 1 GiB.
	OutputMaxBytes int64
	// ArtifactsMaxAge is how long full logs and patches are kept. Defaults to 30 days.
	ArtifactsMaxAge time.Duration
}

// WithDefaults fills zero fields.
func (o StreamOptions) WithDefaults() StreamOptions {
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.DedupWindow == 0 {
		o.DedupWindow = 2 * time.Minute
	}
	if o.OutputMaxAge == 0 {
		o.OutputMaxAge = 7 * 24 * time.Hour
	}
	if o.OutputMaxBytes == 0 {
		o.OutputMaxBytes = 1 << 30
	}
	if o.ArtifactsMaxAge == 0 {
		o.ArtifactsMaxAge = 30 * 24 * time.Hour
	}
	return o
}

// StreamConfigs returns the configuration of every Drover stream.
func StreamConfigs(o StreamOptions) []jetstream.StreamConfig {
	o = o.WithDefaults()
	return []jetstream.StreamConfig{{
		// The log of truth: kept in full, never discarded by age.
		Name: EventsStream, Subjects: []string{eventsPrefix + ">"},
		Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Replicas: o.Replicas, Duplicates: o.DedupWindow, MaxMsgSize: 1 << 20,
		Description: "Drover events: the source of truth the controller folds",
	}, {
		// One message per queued attempt, removed when a worker acks it.
		Name: AttemptsStream, Subjects: []string{attemptsPrefix + ">"},
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy,
		Replicas: o.Replicas, Duplicates: o.DedupWindow, MaxMsgSize: 1 << 20,
		Description: "Drover attempt jobs, consumed by workers per pool and runtime",
	}, {
		Name: OutputStream, Subjects: []string{outputPrefix + ">"},
		Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Replicas: o.Replicas, MaxAge: o.OutputMaxAge, MaxBytes: o.OutputMaxBytes,
		Discard: jetstream.DiscardOld, MaxMsgSize: 1 << 20, PersistMode: outputPersistMode(o.Replicas),
		Description: "Drover runtime output chunks, for live logs",
	}, {
		Name: DeadLetterStream, Subjects: []string{deadLetterPrefix + ">"},
		Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Replicas: o.Replicas, MaxAge: 30 * 24 * time.Hour, MaxMsgSize: deadLetterMaxMsgSize,
		MaxBytes: deadLetterMaxBytes, Discard: jetstream.DiscardOld,
		Description: "Drover poison messages, parked with the reason",
	}}
}

// outputPersistMode is how the OUTPUT stream is written: asynchronously on
// a single server. Its chunks are best effort (the report keeps the
// output's head and tail, the object store the whole log) and nothing
// waits on them, so a chunk lost with its server costs a few lines of a
// live view; fsyncing each, as sync_interval always does, cost as much as
// an event (docs/design.md#durability-fsync-on-every-write). JetStream
// writes replicated streams in its default mode only.
func outputPersistMode(replicas int) jetstream.PersistModeType {
	if replicas > 1 {
		return jetstream.DefaultPersistMode
	}
	return jetstream.AsyncPersistMode
}

// Ensure creates or updates every stream and bucket; it is idempotent. An
// error JetStream will give again however long one waits is a *ConfigError.
// A stream keeps the persist mode it was made with, which JetStream cannot
// change (docs/operations.md).
func Ensure(ctx context.Context, js jetstream.JetStream, o StreamOptions) error {
	o = o.WithDefaults()
	for _, cfg := range StreamConfigs(o) {
		if s, err := js.Stream(ctx, cfg.Name); err == nil {
			cfg.PersistMode = s.CachedInfo().Config.PersistMode
		}
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return ensureError("stream "+cfg.Name, err)
		}
	}
	_, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: ClaimsBucket, Description: "Drover attempt claims: holder, epoch, liveness",
		History: 1, TTL: 7 * 24 * time.Hour, Storage: jetstream.FileStorage, Replicas: o.Replicas,
	})
	if err != nil {
		return ensureError("bucket "+ClaimsBucket, err)
	}
	// A worker re-registers well inside the TTL; a dead one ages out.
	_, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: WorkersBucket, Description: "Drover workers: pool, slots, runtimes and their health",
		History: 1, TTL: WorkersTTL, Storage: jetstream.FileStorage, Replicas: o.Replicas,
	})
	if err != nil {
		return ensureError("bucket "+WorkersBucket, err)
	}
	if err := ensureControllerBuckets(ctx, js, o); err != nil {
		return err
	}
	_, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: ArtifactsBucket, Description: "Drover attempt artifacts: full CLI logs and patches",
		TTL: o.ArtifactsMaxAge, Storage: jetstream.FileStorage, Replicas: o.Replicas,
	})
	if err != nil {
		return ensureError("object store "+ArtifactsBucket, err)
	}
	_, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: TransfersBucket, Description: "Drover API bodies too large for one message (large flows, large status replies)",
		TTL: TransfersMaxAge, Storage: jetstream.FileStorage, Replicas: o.Replicas,
	})
	if err != nil {
		return ensureError("object store "+TransfersBucket, err)
	}
	_, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: JobsBucket, Description: "Drover jobs too large for one message (the integration of a large flow)",
		TTL: JobsMaxAge, Storage: jetstream.FileStorage, Replicas: o.Replicas,
	})
	if err != nil {
		return ensureError("object store "+JobsBucket, err)
	}
	return nil
}

// ConsumerOptions tunes the attempt consumers.
type ConsumerOptions struct {
	// AckWait is how long a claimed job may go without a heartbeat before
	// JetStream redelivers it. Defaults to 30s.
	AckWait time.Duration
	// MaxAckPending bounds jobs held at once across a pool. Defaults to 10000.
	MaxAckPending int
	// MaxWaiting bounds the fetches waiting on the consumer at once: one
	// per worker of the pool that serves the runtime and has a free slot.
	// Beyond it JetStream drops a fetch without a word (a worker, which
	// asks for heartbeats, hears none and fetches again 10 s later), so
	// a pool of more workers than this leaves some idle. JetStream's own
	// default is 512. Defaults to 10000. JetStream cannot change it on an
	// existing consumer: one made with JetStream's default keeps it
	// (docs/operations.md).
	MaxWaiting int
}

// AttemptConsumerName names the durable consumer shared by all workers of a
// pool that serve one runtime. Pool and runtime ids may contain '-' but never
// '_', so '_' separates them: with '-', pool "gpu" runtime "large-claude" and
// pool "gpu-large" runtime "claude" would share one consumer, and ensuring it
// for one would repoint it away from the other's jobs.
func AttemptConsumerName(pool, runtime string) string { return "attempts_" + pool + "_" + runtime }

// EnsureAttemptConsumer creates or updates the pull consumer for pool/runtime.
func EnsureAttemptConsumer(ctx context.Context, js jetstream.JetStream, pool, runtime string, o ConsumerOptions) (jetstream.Consumer, error) {
	if o.AckWait == 0 {
		o.AckWait = 30 * time.Second
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = 10000
	}
	if o.MaxWaiting == 0 {
		o.MaxWaiting = 10000
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       AttemptConsumerName(pool, runtime),
		FilterSubject: AttemptSubject(pool, runtime),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    -1, // poison jobs are terminated by the worker, not by a count
		MaxAckPending: o.MaxAckPending,
		MaxWaiting:    o.MaxWaiting,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Description:   "Drover workers of pool " + pool + " serving runtime " + runtime,
	}
	c, err := js.CreateOrUpdateConsumer(ctx, AttemptsStream, cfg)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// JetStream cannot change an existing consumer's max_waiting: one
		// made before Drover set it has JetStream's default, which 0
		// asks for. Not read first with the consumer's info, which the
		// worker's NATS permissions need not grant (docs/security.md).
		cfg.MaxWaiting = 0
		if c2, err2 := js.CreateOrUpdateConsumer(ctx, AttemptsStream, cfg); err2 == nil {
			c, err = c2, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queue: ensure consumer %s: %w", AttemptConsumerName(pool, runtime), err)
	}
	return c, nil
}

// IsNotFound reports whether err says a stream or consumer does not exist.
func IsNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound)
}

// ensureControllerBuckets creates the controllers' buckets. The lease has
// a TTL of its own on every write (the leader's lease_ttl), so the bucket
// has none; its markers show a lapsed lease to watchers, which servers
// before 2.11 do not (they have no per-message TTL either: the lease needs
// one).
func ensureControllerBuckets(ctx context.Context, js jetstream.JetStream, o StreamOptions) error {
	_, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: LeaderBucket, Description: "Drover's leader lease: which controller decides",
		History: 1, LimitMarkerTTL: leaderMarkerTTL, Storage: jetstream.FileStorage, Replicas: o.Replicas,
	})
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
		return &ConfigError{Why: "the NATS server is older than 2.11: the leader lease needs per-message TTLs", Err: err}
	}
	if err != nil {
		return ensureError("bucket "+LeaderBucket, err)
	}
	_, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: ControllersBucket, Description: "Drover controllers: role, epoch, the sequence each has folded",
		History: 1, TTL: ControllersTTL, Storage: jetstream.FileStorage, Replicas: o.Replicas,
	})
	if err != nil {
		return ensureError("bucket "+ControllersBucket, err)
	}
	return nil
}
