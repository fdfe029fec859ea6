package objstore

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/drover-dev/drover/internal/queue"
	"github.com/nats-io/nats.go/jetstream"
)

// Artifacts stores attempt artifacts in the object store. It is safe for
// concurrent use.
type Artifacts struct {
	js jetstream.JetStream
	// obs is the bucket once opened. Opening it asks the server for the
	// stream's info, a round trip per artifact otherwise: two a task,
	// for a bucket the controller makes once and never removes.
	obs atomic.Pointer[jetstream.ObjectStore]
}

// NewArtifacts returns the artifact store over js.
func NewArtifacts(js jetstream.JetStream) *Artifacts { return &Artifacts{js: js} }

// bucket opens the artifacts bucket, the first time it is there.
func (a *Artifacts) bucket(ctx context.Context) (jetstream.ObjectStore, error) {
	if obs := a.obs.Load(); obs != nil {
		return *obs, nil
	}
	obs, err := a.js.ObjectStore(ctx, queue.ArtifactsBucket)
	if err != nil {
		return nil, fmt.Errorf("objstore: open %s: %w", queue.ArtifactsBucket, err)
	}
	a.obs.Store(&obs)
	return obs, nil
}

// Put stores r under name and returns its size.
func (a *Artifacts) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	obs, err := a.bucket(ctx)
	if err != nil {
		return 0, err
	}
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name}, r)
	if err != nil {
		return 0, fmt.Errorf("objstore: store artifact %s: %w", name, err)
	}
	return int64(info.Size), nil
}

// Get returns a stored artifact; the caller closes it.
func (a *Artifacts) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	obs, err := a.bucket(ctx)
	if err != nil {
		return nil, err
	}
	res, err := obs.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("objstore: read artifact %s: %w", name, err)
	}
	return res, nil
}
