package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/drover-dev/drover/internal/queue"
	"github.com/nats-io/nats.go/jetstream"
)

// Transfers carry bodies too large for one NATS message — a flow of
// thousands of tasks submitted, the status of one answered — through the
// object store: the message names the object in TransferHeader and has no
// body. Objects expire after queue.TransfersMaxAge; nobody needs to delete them.
const (
	// TransferHeader names the object holding a message's body.
	TransferHeader = "Drover-Transfer"
	// MaxTransferSize bounds what a transfer may hold.
	MaxTransferSize = 64 << 20
)

// ErrTransferTooLarge is returned for a body over MaxTransferSize.
var ErrTransferTooLarge = errors.New("objstore: transfer too large")

func transfers(ctx context.Context, js jetstream.JetStream) (jetstream.ObjectStore, error) {
	os, err := js.ObjectStore(ctx, queue.TransfersBucket)
	if err != nil {
		return nil, fmt.Errorf("objstore: open %s: %w", queue.TransfersBucket, err)
	}
	return os, nil
}

// PutTransfer stores data under a fresh random name and returns the name.
func PutTransfer(ctx context.Context, js jetstream.JetStream, data []byte) (string, error) {
	if len(data) > MaxTransferSize {
		return "", fmt.Errorf("%w: %d bytes, at most %d", ErrTransferTooLarge, len(data), MaxTransferSize)
	}
	store, err := transfers(ctx, js)
	if err != nil {
		return "", err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	name := hex.EncodeToString(b[:])
	if _, err := store.PutBytes(ctx, name, data); err != nil {
		return "", fmt.Errorf("objstore: put transfer: %w", err)
	}
	return name, nil
}

// GetTransfer reads a transfer. name comes off the wire: only names
// PutTransfer makes are accepted.
func GetTransfer(ctx context.Context, js jetstream.JetStream, name string) ([]byte, error) {
	if b, err := hex.DecodeString(name); err != nil || len(b) != 16 {
		return nil, fmt.Errorf("objstore: %q is not a transfer name", name)
	}
	store, err := transfers(ctx, js)
	if err != nil {
		return nil, err
	}
	r, err := store.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("objstore: get transfer %s: %w", name, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, MaxTransferSize+1))
	if err != nil {
		return nil, fmt.Errorf("objstore: read transfer %s: %w", name, err)
	}
	if len(data) > MaxTransferSize {
		return nil, fmt.Errorf("%w: %s", ErrTransferTooLarge, name)
	}
	return data, nil
}
