package inventory

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/internal/history"
)

func TestCursorRoundTripsAndRefusesForgeries(t *testing.T) {
	s := New(nil, nil, nil)
	c := &history.Cursor{Time: time.Date(2026, 11, 23, 18, 0, 0, 123000, time.UTC), ID: "abc"}
	enc := s.encodeCursor(c)
	got, err := s.decodeCursor(enc)
	if err != nil || !got.Time.Equal(c.Time) || got.ID != c.ID {
		t.Fatalf("decode(encode(c)) = %+v, %v", got, err)
	}
	body, sig, _ := strings.Cut(enc, ".")
	for _, forged := range []string{"", "nodot", body + ".AAAA", strings.ToUpper(body) + "." + sig, enc + "x"} {
		if _, err := s.decodeCursor(forged); err == nil {
			t.Errorf("forged cursor %q accepted", forged)
		}
	}
	if _, err := New(nil, nil, nil).decodeCursor(enc); err == nil {
		t.Error("a cursor of another server (another key) accepted")
	}
}

func TestTimeParamTakesRFC3339OrADurationBack(t *testing.T) {
	now := time.Date(2026, 11, 23, 18, 0, 0, 0, time.UTC)
	if got, err := timeParam("24h", now); err != nil || !got.Equal(now.Add(-24*time.Hour)) {
		t.Errorf("24h: %v, %v", got, err)
	}
	if got, err := timeParam("2026-11-22T10:00:00Z", now); err != nil || got.Hour() != 10 {
		t.Errorf("RFC 3339: %v, %v", got, err)
	}
	for _, bad := range []string{"yesterday", "-5h", "2026-11-22"} {
		if _, err := timeParam(bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The served document describes every route the server answers.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi %q, want 3.x", doc.OpenAPI)
	}
	for _, p := range []string{"GET /api/v1/history", "GET /api/v1/applications", "GET /api/v1/clusters", "GET /api/v1/releases", "GET /api/v1/changes", "POST /api/v1/what-if", "GET /openapi.json"} {
		method, path, _ := strings.Cut(p, " ")
		if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
			t.Errorf("%s is served but not described", p)
		}
	}
	params := map[string]bool{}
	for _, p := range doc.Paths["/api/v1/history"]["get"].(map[string]any)["parameters"].([]any) {
		params[p.(map[string]any)["name"].(string)] = true
	}
	for _, p := range append(filterParams, "since", "until", "limit", "cursor") {
		if !params[p] {
			t.Errorf("history parameter %s is not described", p)
		}
	}
}
