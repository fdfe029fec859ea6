package objstore

import (
	"context"
	"fmt"
	"io"

	"github.com/drover-dev/drover/internal/queue"
	"github.com/nats-io/nats.go/jetstream"
)

// Artifacts stores attempt artifacts in the object store.
type Artifacts struct {
	js jetstream.JetStream
}

// NewArtifacts returns the artifact store over js.
func NewArtifacts(js jetstream.JetStream) *Artifacts { return &Artifacts{js: js} }

// Put stores r under name and returns its size.
func (a *Artifacts) Put(ctx context.Context, name string, r io.Reader) (int64, error) {
	obs, err := a.js.ObjectStore(ctx, queue.ArtifactsBucket)
	if err != nil {
		return 0, fmt.Errorf("objstore: open %s: %w", queue.ArtifactsBucket, err)
	}
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name}, r)
	if err != nil {
		return 0, fmt.Errorf("objstore: store artifact %s: %w", name, err)
	}
	return int64(info.Size), nil
}

// Get returns a stored artifact; the caller closes it.
func (a *Artifacts) Get(ctx context.Context, name string) (io.ReadCloser, error) {
	obs, err := a.js.ObjectStore(ctx, queue.ArtifactsBucket)
	if err != nil {
		return nil, fmt.Errorf("objstore: open %s: %w", queue.ArtifactsBucket, err)
	}
	res, err := obs.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("objstore: read artifact %s: %w", name, err)
	}
	return res, nil
}
