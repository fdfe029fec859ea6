package console

import (
	"reflect"
)

// cleaned returns a copy of v with every string in it passed through
// cleanTerminal: what a page or a live update shows never carries a
// terminal's control sequences, whichever field it came from. Copies,
// never changes v (which may share memory with the projection).
func cleaned[T any](v T) T {
	rv := reflect.ValueOf(&v).Elem()
	out := cleanValue(rv)
	return out.Interface().(T)
}

func cleanValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if c := cleanTerminal(s); c != s {
			nv := reflect.New(v.Type()).Elem()
			nv.SetString(c)
			return nv
		}
		return v
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		nv := reflect.New(v.Type().Elem())
		nv.Elem().Set(cleanValue(v.Elem()))
		return nv
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		nv := reflect.New(v.Type()).Elem()
		nv.Set(cleanValue(v.Elem()))
		return nv
	case reflect.Struct:
		nv := reflect.New(v.Type()).Elem()
		nv.Set(v) // unexported fields (time.Time's) as they are
		for i := range v.NumField() {
			if f := nv.Field(i); f.CanSet() {
				f.Set(cleanValue(v.Field(i)))
			}
		}
		return nv
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		if v.Type().Elem().Kind() == reflect.Uint8 { // bytes (json.RawMessage): shown only as cleaned strings
			return v
		}
		nv := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			nv.Index(i).Set(cleanValue(v.Index(i)))
		}
		return nv
	case reflect.Array:
		nv := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			nv.Index(i).Set(cleanValue(v.Index(i)))
		}
		return nv
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		nv := reflect.MakeMapWithSize(v.Type(), v.Len())
		it := v.MapRange()
		for it.Next() {
			nv.SetMapIndex(cleanValue(it.Key()), cleanValue(it.Value()))
		}
		return nv
	}
	return v
}
