// Package appsource owns where an Application's manifests come from: it fetches git sources
// (go-git, no git binary) into an on-disk cache of one tree per commit, and renders a
// directory of that tree (plain YAML/JSON, or a kustomization run in-process) or inline
// manifests into objects, within Limits on file size, total bytes and object count.
//
// It never talks to Kubernetes: writing what it renders is the caller's job. Rendering reads
// only inside the fetched tree: every read goes through an os.Root, so a symlink or a
// kustomize entry that leaves the repository is refused, and kustomize never fetches remote
// bases. Errors are *Error values naming the API field or file:line a user must fix;
// IsTransient tells a failure worth retrying (network) from one that will repeat.
package appsource
