// Package interpret knows what a kind means to Flotilla: where its replicas are, how to set a
// cluster's share, what of its status to reflect from a member, how to sum members' statuses
// into the template's, and whether it is healthy. Built-in Go interpreters cover the native
// workload kinds; other kinds are treated as having no replicas, their status reflected as is
// and their health taken from a Ready condition when they have one. Lua customizations will
// plug in behind the same Interpreter interface.
//
// It reads and returns plain unstructured objects and must not talk to any API server.
package interpret
