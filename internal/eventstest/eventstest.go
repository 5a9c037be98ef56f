// Package eventstest holds helpers for unit tests that record events with client-go's
// FakeRecorder. It is imported by tests only and touches nothing else.
package eventstest

import "k8s.io/client-go/tools/events"

// Drain returns the events recorded so far ("Type Reason message"), without waiting.
func Drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
