package execute

import (
	"encoding/base64"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/render"
)

// Drift is decided without a call to the member: the rendered object, after Retain and with
// spec.replicas left to a scale-subresource writer, must be a subset of the live object from
// the member informer. Every field the rendered object sets is a field Flotilla owns through
// server-side apply, so a field that differs is one a re-apply would put back. The check
// leans towards "differs" only where the live form legitimately differs from what was
// applied (a list another manager added elements to is matched by name; quantities and
// numbers are compared by value; zero values match absent fields, as the API server drops
// them). Whatever still differs is confirmed by the member itself: the re-apply (Correct)
// or a server-side dry-run (Report) that leaves the object as it is means it was not drift,
// and that answer is remembered until the object changes again.

// driftField is one field where the live object differs from the rendered one.
type driftField struct {
	path string
	live any
}

// diffObject lists where live differs from desired in the fields desired sets. Only the
// labels and annotations of metadata are compared (name and namespace identify the object;
// the rest is the server's), and status never.
func diffObject(desired, live map[string]any) []driftField {
	var out []driftField
	for _, k := range sortedKeys(desired) {
		switch k {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			want, _ := desired[k].(map[string]any)
			have, _ := live[k].(map[string]any)
			for _, mk := range []string{"labels", "annotations"} {
				diffValue("/metadata/"+mk, want[mk], have[mk], &out)
			}
			continue
		}
		diffValue("/"+escapePointer(k), desired[k], live[k], &out)
	}
	return out
}

func diffValue(path string, want, have any, out *[]driftField) {
	if want == nil {
		return
	}
	if have == nil && kube.ZeroJSON(want) {
		return // the server drops empty and zero values it serializes with omitempty
	}
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if len(w) == 0 {
			return
		}
		if !ok && have != nil {
			*out = append(*out, driftField{path, have})
			return
		}
		for _, k := range sortedKeys(w) { // a map gone as a whole names each of its keys
			diffValue(path+"/"+escapePointer(k), w[k], h[k], out)
		}
	case []any:
		h, ok := have.([]any)
		if len(w) == 0 {
			return // an empty list may be associative: what others added is theirs
		}
		if !ok {
			*out = append(*out, driftField{path, have})
			return
		}
		diffList(path, w, h, out)
	default:
		if !scalarEqual(want, have) {
			*out = append(*out, driftField{path, have})
		}
	}
}

// diffList compares lists. Elements with a name (containers, env, ports, volumes) are matched
// by name, so elements another manager added (an injected sidecar) are not drift; other lists
// are compared element by element and must have the same length.
func diffList(path string, want, have []any, out *[]driftField) {
	if names, ok := elementNames(want); ok {
		live := map[string]any{}
		if liveNames, ok := elementNames(have); ok {
			for i, n := range liveNames {
				live[n] = have[i]
			}
		}
		for i, n := range names {
			h, found := live[n]
			if !found {
				*out = append(*out, driftField{path + "/" + strconv.Itoa(i), nil})
				continue
			}
			diffValue(path+"/"+strconv.Itoa(i), want[i], h, out)
		}
		return
	}
	if len(want) != len(have) {
		*out = append(*out, driftField{path, have})
		return
	}
	for i := range want {
		diffValue(path+"/"+strconv.Itoa(i), want[i], have[i], out)
	}
}

// elementNames returns the "name" of every element when all are maps with distinct names.
func elementNames(l []any) ([]string, bool) {
	if len(l) == 0 {
		return nil, false
	}
	names := make([]string, 0, len(l))
	seen := map[string]bool{}
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, false
		}
		n, ok := m["name"].(string)
		if !ok || seen[n] {
			return nil, false
		}
		seen[n] = true
		names = append(names, n)
	}
	return names, true
}

// scalarEqual compares leaves: numbers by value, strings also as quantities ("1000m" is "1").
func scalarEqual(want, have any) bool {
	if wf, ok := kube.JSONNumber(want); ok {
		hf, ok := kube.JSONNumber(have)
		return ok && wf == hf
	}
	if ws, ok := want.(string); ok {
		hs, ok := have.(string)
		if !ok {
			return false
		}
		if ws == hs {
			return true
		}
		wq, err1 := resource.ParseQuantity(ws)
		hq, err2 := resource.ParseQuantity(hs)
		return err1 == nil && err2 == nil && wq.Cmp(hq) == 0
	}
	return reflect.DeepEqual(want, have)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// removePointer deletes the field a JSON pointer names from obj. Under a list a segment is an
// index, "*" for every element, or the name of the element.
func removePointer(obj map[string]any, pointer string) {
	if segs := render.PointerSegments(pointer); segs != nil {
		removeAt(obj, segs)
	}
}

func removeAt(node any, segs []string) {
	if len(segs) == 0 {
		return
	}
	switch n := node.(type) {
	case map[string]any:
		if len(segs) == 1 {
			delete(n, segs[0])
			return
		}
		removeAt(n[segs[0]], segs[1:])
	case []any:
		for i, e := range n {
			if !render.SegmentMatches(segs[0], i, e) {
				continue
			}
			if len(segs) == 1 {
				// The element itself: blank it rather than shift the others' indexes.
				n[i] = nil
				continue
			}
			removeAt(e, segs[1:])
		}
	}
}

// keepLive sets, in what is about to be applied, the fields a JSON pointer names to their
// values in the live object (and drops those the live object lacks), so putting one drifted
// field back never reverts a field the policy's ignoreFields leave to the member. Pointers
// resolve as in removePointer; a list element is paired with the live element of the same name,
// else of the same index.
func keepLive(obj, live map[string]any, pointer string) {
	if segs := render.PointerSegments(pointer); segs != nil {
		keepLiveAt(obj, live, segs)
	}
}

func keepLiveAt(node, live any, segs []string) {
	if len(segs) == 0 {
		return
	}
	switch n := node.(type) {
	case map[string]any:
		l, _ := live.(map[string]any)
		lv, ok := l[segs[0]]
		if len(segs) == 1 {
			if ok {
				n[segs[0]] = runtime.DeepCopyJSONValue(lv)
			} else {
				delete(n, segs[0])
			}
			return
		}
		if ok {
			keepLiveAt(n[segs[0]], lv, segs[1:])
		} else {
			removeAt(n[segs[0]], segs[1:])
		}
	case []any:
		l, _ := live.([]any)
		for i, e := range n {
			if !render.SegmentMatches(segs[0], i, e) {
				continue
			}
			le, found := pairedElement(l, i, e)
			switch {
			case !found:
				if len(segs) > 1 {
					removeAt(e, segs[1:])
				}
			case len(segs) == 1:
				n[i] = runtime.DeepCopyJSONValue(le)
			default:
				keepLiveAt(e, le, segs[1:])
			}
		}
	}
}

// pairedElement is the live list's element for the rendered element e at index i: the one of
// the same name when elements have names, else the one at the same index.
func pairedElement(live []any, i int, e any) (any, bool) {
	if m, ok := e.(map[string]any); ok {
		if name, ok := m["name"].(string); ok {
			for _, le := range live {
				if lm, ok := le.(map[string]any); ok && lm["name"] == name {
					return le, true
				}
			}
			return nil, false
		}
	}
	if i < len(live) {
		return live[i], true
	}
	return nil, false
}

// secretForComparison turns a Secret's stringData into data, which is what the member stores.
func secretForComparison(desired *unstructured.Unstructured) {
	if desired.GetKind() != "Secret" || desired.GetAPIVersion() != "v1" {
		return
	}
	sd, ok := desired.Object["stringData"].(map[string]any)
	if !ok {
		return
	}
	data, _ := desired.Object["data"].(map[string]any)
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range sd {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	desired.Object["data"] = data
	delete(desired.Object, "stringData")
}

// driftOf compares a rendered object with its live member object. desired is changed: the
// caller passes a copy with Retain already applied.
func driftOf(desired, live *unstructured.Unstructured, ignore []string) []driftField {
	retainScaledReplicas(live, desired)
	secretForComparison(desired)
	for _, p := range ignore {
		removePointer(desired.Object, p)
	}
	return diffObject(desired.Object, live.Object)
}

func fieldPaths(fields []driftField) []string {
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		out = append(out, f.path)
	}
	return out
}

// driftSignature identifies one drift: the fields and the values found there, so the same
// difference found again is not counted or confirmed twice.
func driftSignature(fields []driftField) string {
	var b strings.Builder
	for _, f := range fields {
		fmt.Fprintf(&b, "%s=%v;", f.path, f.live)
	}
	return b.String()
}
