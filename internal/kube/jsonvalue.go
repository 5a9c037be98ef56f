package kube

import "math"

// ZeroJSON says whether v, a decoded JSON value, is its type's zero: null, 0, "", false, {} or
// []. Built-in kinds omit such fields when stored, so comparisons of stored objects treat a
// zero field as an absent one.
func ZeroJSON(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	if f, ok := JSONNumber(v); ok {
		return f == 0
	}
	return false
}

// JSONNumber is v as a float64 when it is a number of any Go type JSON decoding and
// unstructured objects use.
func JSONNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case int:
		return float64(x), true
	case float64:
		return x, !math.IsNaN(x)
	case float32:
		return float64(x), true
	}
	return 0, false
}
