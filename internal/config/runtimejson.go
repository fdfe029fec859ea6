package config

import (
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"time"
)

// MarshalJSON writes a runtime as its configuration reads: by the config
// keys (env_passthrough, no_output_timeout, …) and durations as strings
// ("30m0s"), so that `worker runtime list -o json` can be read back as
// configuration.
func (rt Runtime) MarshalJSON() ([]byte, error) {
	return json.Marshal(configMap(reflect.ValueOf(rt)))
}

// configMap is a struct's fields by their mapstructure keys.
func configMap(v reflect.Value) map[string]any {
	out := map[string]any{}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key := f.Tag.Get("mapstructure")
		if key == "" || !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		switch {
		case strings.HasSuffix(key, ",squash"):
			maps.Copy(out, configMap(fv)) // the native runtime's fields sit beside the others
		case fv.Type() == reflect.TypeFor[time.Duration]():
			out[key] = time.Duration(fv.Int()).String()
		case fv.Kind() == reflect.Struct:
			out[key] = configMap(fv)
		default:
			out[key] = fv.Interface()
		}
	}
	return out
}
