package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/nats-io/nats.go/jetstream"
)

// put writes v, encoded as JSON, under key in bucket: what names it in
// errors ("worker w1").
func put(ctx context.Context, js jetstream.JetStream, bucket, key, what string, v any) error {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return fmt.Errorf("fleet: open %s: %w", bucket, err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("fleet: encode registration: %w", err)
	}
	if _, err := kv.Put(ctx, key, data); err != nil {
		return fmt.Errorf("fleet: register %s: %w", what, err)
	}
	return nil
}

// remove deletes key from bucket; one that is gone already is no error.
func remove(ctx context.Context, js jetstream.JetStream, bucket, key, what string) error {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return fmt.Errorf("fleet: open %s: %w", bucket, err)
	}
	if err := kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("fleet: deregister %s: %w", what, err)
	}
	return nil
}

// list decodes every entry of bucket with decode, in the order of their
// keys; decode returns nil for an entry to skip (one that does not
// decode: one bad writer must not hide the others).
func list[T any](ctx context.Context, js jetstream.JetStream, bucket string, decode func(key string, raw []byte) *T) ([]*T, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("fleet: open %s: %w", bucket, err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("fleet: list %s: %w", bucket, err)
	}
	var keys []string
	for key := range lister.Keys() {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var out []*T
	for _, key := range keys {
		e, err := kv.Get(ctx, key)
		if err != nil {
			continue // deleted or expired since listed
		}
		if v := decode(key, e.Value()); v != nil {
			out = append(out, v)
		}
	}
	return out, nil
}
