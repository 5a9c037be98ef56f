package localfleet

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress prints one line per finished step. Steps run concurrently, so lines appear in the
// order steps finish, each with its own duration.
type progress struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *progress) linef(format string, args ...any) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// step starts timing a step; the returned func prints its outcome.
func (p *progress) step(name string) func(error) {
	start := time.Now()
	return func(err error) {
		if err != nil {
			p.linef("  ✗ %-34s failed after %.1fs", name, time.Since(start).Seconds())
			return
		}
		p.linef("  ✓ %-34s ready in %.1fs", name, time.Since(start).Seconds())
	}
}
