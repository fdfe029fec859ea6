package queue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A job whose encoding is too large for a message — the integration of a
// flow of tens of thousands of tasks names each result it merges — travels
// as a claim check: the controller stores the encoding in the jobs object
// store and queues a message without a body that names the object in
// JobBodyHeader. The name is the attempt id and the encoding's SHA-256, so
// a body is bound to its job and to its content: a republished decision
// stores the same object again, and nothing else can pass for it.
const (
	// JobBodyHeader names the object holding a job's encoding.
	JobBodyHeader = "Drover-Job-Body"
	// MaxJobSize bounds a job's encoding: a flow's largest integration
	// (flow.MaxTasks results of the longest ids) fits.
	MaxJobSize = 32 << 20
	// maxInlineJob is the largest encoding queued in the message itself,
	// well inside the attempts stream's 1 MiB messages and the server's
	// default max_payload.
	maxInlineJob = 512 << 10
)

// jobBody moves msg's body to the jobs object store when it is too large
// for a message, leaving the object's name in its header.
func jobBody(ctx context.Context, js jetstream.JetStream, attempt string, msg *nats.Msg) error {
	if len(msg.Data) <= maxInlineJob {
		return nil
	}
	if len(msg.Data) > MaxJobSize {
		return fmt.Errorf("queue: job %s is %d bytes encoded, more than %d", attempt, len(msg.Data), MaxJobSize)
	}
	sum := sha256.Sum256(msg.Data)
	name := attempt + "." + hex.EncodeToString(sum[:])
	store, err := js.ObjectStore(ctx, JobsBucket)
	if err != nil {
		return fmt.Errorf("queue: open %s: %w", JobsBucket, err)
	}
	if _, err := store.PutBytes(ctx, name, msg.Data); err != nil {
		return fmt.Errorf("queue: store job %s: %w", attempt, err)
	}
	msg.Header.Set(JobBodyHeader, name)
	msg.Data = nil
	return nil
}

// ReadJob decodes a queued job, a message's header and data, reading its
// body from the jobs object store when the header names one. An error
// wrapping ErrBadJob is for good: the job can never be read (it is poison);
// any other is worth a later try.
func ReadJob(ctx context.Context, js jetstream.JetStream, header nats.Header, data []byte) (*Job, error) {
	name := header.Get(JobBodyHeader)
	if name == "" {
		return DecodeJob(data)
	}
	attempt, digest, ok := strings.Cut(name, ".")
	want, err := hex.DecodeString(digest)
	if !ok || err != nil || len(want) != sha256.Size || attempt == "" {
		return nil, fmt.Errorf("%w: body %.100q is not ATTEMPT.SHA256", ErrBadJob, name)
	}
	if len(data) > 0 {
		return nil, fmt.Errorf("%w: a body in the message and another in %s", ErrBadJob, name)
	}
	data, err = readJobBody(ctx, js, name)
	if err != nil {
		return nil, err
	}
	if got := sha256.Sum256(data); !bytes.Equal(got[:], want) {
		return nil, fmt.Errorf("%w: body %s does not have the digest its name gives", ErrBadJob, name)
	}
	j, err := DecodeJob(data)
	if err != nil {
		return nil, err
	}
	if j.Attempt != attempt {
		return nil, fmt.Errorf("%w: body %s holds attempt %q", ErrBadJob, name, j.Attempt)
	}
	return j, nil
}

// readJobBody reads the object name, no more than MaxJobSize of it.
func readJobBody(ctx context.Context, js jetstream.JetStream, name string) ([]byte, error) {
	store, err := js.ObjectStore(ctx, JobsBucket)
	if err != nil {
		return nil, fmt.Errorf("queue: open %s: %w", JobsBucket, err)
	}
	res, err := store.Get(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		// Stored before the job was queued, and kept for JobsMaxAge.
		return nil, fmt.Errorf("%w: body %s is not in %s (older than %s?)", ErrBadJob, name, JobsBucket, JobsMaxAge)
	case err != nil:
		return nil, fmt.Errorf("queue: read job body %s: %w", name, err)
	}
	defer res.Close()
	if info, err := res.Info(); err == nil && info.Size > MaxJobSize {
		return nil, fmt.Errorf("%w: body %s is %d bytes, more than %d", ErrBadJob, name, info.Size, MaxJobSize)
	}
	data, err := io.ReadAll(io.LimitReader(res, MaxJobSize+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("queue: read job body %s: %w", name, err)
	case len(data) > MaxJobSize:
		return nil, fmt.Errorf("%w: body %s is more than %d bytes", ErrBadJob, name, MaxJobSize)
	}
	return data, nil
}
