package luavm

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A customization's error reaches the binding of every object it runs on. When a pattern is
// refused, the error names the subject's size and at most 40 bytes of the pattern: the
// object's data (here an annotation, matched as the subject and spliced into the pattern
// beyond those 40 bytes) is not echoed.
func TestPatternErrorsNameTheSubjectsSizeNotItsContent(t *testing.T) {
	pool := NewPool(PoolOptions{Limits: Limits{Timeout: 500 * time.Millisecond}})
	s, err := Compile("echo.lua", `function F(obj)
  local note = obj.metadata.annotations.note
  return string.find(note, string.rep("a*", 30) .. "b" .. obj.metadata.annotations.secret)
end`)
	if err != nil {
		t.Fatal(err)
	}
	note := strings.Repeat("a", 3000) + "SUBJECTSECRET"
	obj := map[string]any{"metadata": map[string]any{"annotations": map[string]any{"note": note, "secret": "PATTERNSECRET"}}}
	_, err = pool.Call(context.Background(), s, "F", 1, obj)
	if err == nil || !strings.Contains(err.Error(), "matching steps, over the limit") {
		t.Fatalf("error = %v, want the pattern refused", err)
	}
	if !strings.Contains(err.Error(), "on a subject of 3013 bytes") {
		t.Errorf("error = %v, want it to name the subject's size", err)
	}
	if strings.Contains(err.Error(), "SECRET") || len(err.Error()) > 1024 {
		t.Errorf("the error echoes the object's data: %v", err)
	}
}
