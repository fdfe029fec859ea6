package config

import (
	"fmt"
	"math"
	"reflect"

	"github.com/dustin/go-humanize"
)

// ByteSize is a number of bytes. In a config file or a DROVER_* variable it
// is a plain number of bytes or a size with a unit: "512MiB", "2GB", "1.5 GiB".
type ByteSize int64

// String prints the size with a binary unit.
func (b ByteSize) String() string {
	if b < 0 {
		return fmt.Sprintf("%d B", int64(b))
	}
	return humanize.IBytes(uint64(b))
}

// byteSizeHook decodes strings (and numbers) into ByteSize.
func byteSizeHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[ByteSize]() || from.Kind() != reflect.String {
		return data, nil
	}
	n, err := humanize.ParseBytes(data.(string))
	if err != nil {
		return nil, fmt.Errorf("%q is not a size (bytes, or a number with a unit like 512MiB or 2GB)", data)
	}
	if n > math.MaxInt64 {
		return nil, fmt.Errorf("%q is too large", data)
	}
	return ByteSize(n), nil
}
