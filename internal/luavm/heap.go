package luavm

import (
	"errors"
	"fmt"
	"runtime/metrics"
	"time"
)

// heapSample is the runtime metric of live heap bytes; reading it does not stop the world.
const heapSample = "/memory/classes/heap/objects:bytes"

// heapWatchDelay: calls that finish sooner (nearly all: tens of microseconds) never start the
// watchdog, so they pay nothing for it.
const heapWatchDelay = 5 * time.Millisecond

// errHeapLimit is the cancel cause of a call whose heap growth passed Limits.MaxHeapGrowth.
var errHeapLimit = errors.New("heap limit")

// watchHeap cancels the call when the process heap grows by more than limit bytes while the
// call runs. gopher-lua has no allocation hook, so growth of the whole process is the
// measure: a false positive needs another goroutine to allocate that much within the same
// call, and only costs that call. It returns a stop function.
func watchHeap(cancel func(error), limit int64) func() {
	if limit <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	timer := time.AfterFunc(heapWatchDelay, func() {
		// The baseline is taken here, not at the start: the fast path reads nothing. What a
		// script allocates in its first 5ms (a few MiB at most) is not counted.
		s := []metrics.Sample{{Name: heapSample}}
		metrics.Read(s)
		start := int64(s[0].Value.Uint64())
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				metrics.Read(s)
				if int64(s[0].Value.Uint64())-start > limit {
					cancel(errHeapLimit)
					return
				}
			}
		}
	})
	return func() {
		timer.Stop()
		close(done)
	}
}

func heapLimitError(where string, limits Limits) error {
	return fmt.Errorf("luavm: %s: the process heap grew by more than the memory limit of %d MiB (Limits.MaxHeapGrowth) during the call; build smaller tables and strings", where, limits.MaxHeapGrowth>>20)
}
