package controller

import (
	"reflect"
	"testing"
)

// fill sets every settable part of v to something not zero.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0))
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem())
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				fill(v.Field(i))
			}
		}
	}
}

// TestJobSpecCarriesEveryField: a job the decisions describe reaches the
// queue whole. A field added to queue.Job and not to jobSpec (or not
// carried over) is zero here.
func TestJobSpecCarriesEveryField(t *testing.T) {
	var spec jobSpec
	fill(reflect.ValueOf(&spec).Elem())
	q := reflect.ValueOf(*spec.queueJob())
	sv := reflect.ValueOf(spec)
	for i := range q.NumField() {
		name := q.Type().Field(i).Name
		if name == "V" { // the encoding's version: the queue sets it
			continue
		}
		got := q.Field(i)
		if got.IsZero() {
			t.Errorf("queue.Job.%s is not carried from jobSpec", name)
			continue
		}
		want := sv.FieldByName(name)
		if !want.IsValid() {
			t.Errorf("jobSpec has no %s", name)
			continue
		}
		if got.Kind() == reflect.Pointer && got.Elem().Kind() == reflect.Struct { // the review's type is the queue's: by name
			for k := range got.Elem().NumField() {
				f := got.Elem().Type().Field(k).Name
				if !reflect.DeepEqual(got.Elem().Field(k).Interface(), want.Elem().FieldByName(f).Interface()) {
					t.Errorf("queue.Job.%s.%s = %v, want %v", name, f, got.Elem().Field(k), want.Elem().FieldByName(f))
				}
			}
			continue
		}
		if !reflect.DeepEqual(got.Interface(), want.Interface()) {
			t.Errorf("queue.Job.%s = %v, want %v", name, got, want)
		}
	}
}
