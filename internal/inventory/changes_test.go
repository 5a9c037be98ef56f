package inventory

import "testing"

func TestChangesCoalesceUntilRead(t *testing.T) {
	h := NewChanges()
	sub := h.subscribe()
	defer h.unsubscribe(sub)
	a := Changed{Kind: "Release", Namespace: "shop", Name: "web-r2"}
	for range 100 {
		h.Publish(a)
	}
	h.Publish(Changed{Kind: "Cluster", Name: "east"})
	got, resync := h.take(sub)
	if resync || len(got) != 2 {
		t.Fatalf("100 changes of one release and one cluster should read as 2, got %v (resync %v)", got, resync)
	}
	if got, _ := h.take(sub); len(got) != 0 {
		t.Fatalf("a read empties the subscriber, left %v", got)
	}
}

func TestChangesNeverDropSilently(t *testing.T) {
	h := NewChanges()
	sub := h.subscribe()
	defer h.unsubscribe(sub)
	for i := range maxPending + 10 {
		h.Publish(Changed{Kind: "ResourceBinding", Namespace: "shop", Name: string(rune('a'+i%26)) + string(rune(i))})
	}
	if _, resync := h.take(sub); !resync {
		t.Fatal("past maxPending the subscriber must be told to read everything again")
	}
	if _, resync := h.take(sub); resync {
		t.Fatal("resync is said once")
	}
}

func TestChangesPublishNeverBlocks(t *testing.T) {
	h := NewChanges()
	for range 3 {
		sub := h.subscribe()
		defer h.unsubscribe(sub)
	}
	// Nobody reads: publishing still returns (the wake channel holds one signal).
	for i := range 1000 {
		h.Publish(Changed{Kind: "Release", Name: string(rune(i))})
	}
	if h.Subscribers() != 3 {
		t.Fatalf("subscribers = %d", h.Subscribers())
	}
}
