// Package apideps holds only a test: that a program importing the api module
// (github.com/flotilla-dev/flotilla/api) gets the API types and apply configurations without
// the controller-manager's dependencies (controller-runtime, go-git, pgx, SQLite, gopher-lua,
// chromedp). It writes a fresh module that imports every package of api/ through a replace
// and asks `go list -deps` what it builds, so an import added to api/ that drags any of those
// in fails `make test`.
package apideps
