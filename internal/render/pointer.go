package render

import (
	"strconv"
	"strings"
)

// Field pointers name fields of a manifest as JSON pointers (RFC 6901) with one extension for
// lists, the form a policy's driftCorrection.ignoreFields takes: under a list a segment is an
// index, "*" for every element, or the name of the element (its "name" field), so
// /spec/template/spec/containers/web/image survives a reordering of the containers.

// PointerSegments splits a pointer into its unescaped segments; nil when it is not one.
func PointerSegments(pointer string) []string {
	if !strings.HasPrefix(pointer, "/") {
		return nil
	}
	segs := strings.Split(pointer[1:], "/")
	for i := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(segs[i], "~1", "/"), "~0", "~")
	}
	return segs
}

// SegmentMatches says whether a pointer segment under a list names element e at index i.
func SegmentMatches(seg string, i int, e any) bool {
	if seg == "*" || seg == strconv.Itoa(i) {
		return true
	}
	m, ok := e.(map[string]any)
	return ok && m["name"] == seg
}

// PointerMissesElement says whether a pointer reaches a list of obj and no element matches its
// segment there: a container name misspelt, an index past the end. A pointer that stops at a
// field the object does not set (spec.replicas left to an autoscaler) is not a miss.
func PointerMissesElement(obj map[string]any, pointer string) bool {
	segs := PointerSegments(pointer)
	return segs != nil && missesElement(obj, segs)
}

func missesElement(node any, segs []string) bool {
	if len(segs) == 0 {
		return false
	}
	switch n := node.(type) {
	case map[string]any:
		v, ok := n[segs[0]]
		return ok && missesElement(v, segs[1:])
	case []any:
		for i, e := range n {
			if SegmentMatches(segs[0], i, e) && !missesElement(e, segs[1:]) {
				return false
			}
		}
		return true
	}
	return false
}
