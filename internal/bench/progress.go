package bench

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// FleetProgressWriter condenses the local fleet's one line per step into a line every period: a
// bench of 100 members would otherwise print several hundred lines before its first figure,
// or (as it did) nothing for minutes. A failed step is printed at once.
type FleetProgressWriter struct {
	mu      sync.Mutex
	out     io.Writer
	what    string
	start   time.Time
	every   time.Duration
	printed time.Time
	ready   int
	// members is how many members the fleet has; joined counts those that became Ready.
	members, joined int
	partial         []byte
	// finished: the fleet is up; its later steps (a member restarted mid-bench) say nothing.
	finished bool
}

// Finish ends the progress lines.
func (p *FleetProgressWriter) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = true
}

func newFleetProgress(out io.Writer, what string, members int, every time.Duration) *FleetProgressWriter {
	now := time.Now()
	return &FleetProgressWriter{out: out, what: what, members: members, start: now, every: every, printed: now}
}

func (p *FleetProgressWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return len(b), nil
	}
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		line := string(p.partial[:i])
		p.partial = p.partial[i+1:]
		switch {
		case strings.Contains(line, "✗"):
			fmt.Fprintln(p.out, line)
		case strings.Contains(line, "✓") || strings.HasSuffix(line, " started"):
			p.ready++
			if strings.Contains(line, "✓ cluster/") {
				p.joined++ // the join's line: the member's Cluster is Ready
			}
			// Only steps print: a fleet stopping at the end says nothing.
			if now := time.Now(); now.Sub(p.printed) >= p.every {
				p.printed = now
				fmt.Fprintf(p.out, "  %s: %d of %d members joined, %d steps done after %.0fs\n", p.what, p.joined, p.members, p.ready, now.Sub(p.start).Seconds())
			}
		}
	}
	return len(b), nil
}

// FleetProgress is a writer for the Out of a local fleet of members members that prints to out
// how far it got, a line every 10 s, until Finish.
func FleetProgress(out io.Writer, members int) *FleetProgressWriter {
	return newFleetProgress(out, "fleet", members, 10*time.Second)
}
