// Package isnil tells whether an argument is nil, including a typed nil
// held in an interface (a nil *redis.Client passed as a
// redis.UniversalClient), so that every constructor can reject it with its
// own ErrInvalid instead of panicking later.
package isnil

import "reflect"

// Nil reports whether v is nil or an interface holding a nil pointer, map,
// slice, channel or function.
func Nil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface, reflect.UnsafePointer:
		return r.IsNil()
	}
	return false
}
