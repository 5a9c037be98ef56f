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

// PointerResolves says whether a pointer names at least one field obj sets. A pointer that
// resolves to nothing in a rendered template ignores nothing: Flotilla owns only the fields
// it sets.
func PointerResolves(obj map[string]any, pointer string) bool {
	segs := PointerSegments(pointer)
	return segs != nil && resolves(obj, segs)
}

func resolves(node any, segs []string) bool {
	if len(segs) == 0 {
		return true
	}
	switch n := node.(type) {
	case map[string]any:
		v, ok := n[segs[0]]
		return ok && resolves(v, segs[1:])
	case []any:
		for i, e := range n {
			if SegmentMatches(segs[0], i, e) && resolves(e, segs[1:]) {
				return true
			}
		}
	}
	return false
}
