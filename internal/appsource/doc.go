// Package appsource owns where an Application's manifests come from: it fetches git sources
// (go-git, no git binary) into an on-disk cache of one tree per team, repository and commit,
// and renders a directory of that tree (plain YAML/JSON, or a kustomization run in-process) or
// inline manifests into objects, within Limits on file size, total bytes and object count.
//
// It never talks to Kubernetes: writing what it renders is the caller's job. Rendering reads
// only inside the fetched tree: every read goes through an os.Root, so a symlink or a
// kustomize entry that leaves the repository is refused, and kustomize never fetches remote
// bases. Errors are *Error values naming the API field or file:line a user must fix;
// IsTransient tells a failure worth retrying (network) from one that will repeat.
//
// A git source is a tenant's input and the server behind it may be hostile, so the tenant
// boundary holds in this package, not only in the caller's allow-list. A repoURL is
// normalised before it is matched or fetched (NormalizeRepoURL): percent-escapes, backslashes,
// "." ".." and empty segments, queries, fragments and credentials are refused, so the
// repository a Team's glob matched is the one requested. An HTTP redirect is checked hop by
// hop before it is followed: same scheme and host, and a repository the caller's Git.Allowed
// accepts (the Team's spec.repositories). go-git v5 chooses transports from a process-wide
// table, so this package installs its own HTTP client there at init (and removes file://);
// per-call policy rides in the request context. A server's words never reach a message
// whole: error response bodies are dropped before go-git reads them, an HTTP failure is
// shown as its status code and reason phrase, and other server text (ref names, protocol
// errors) is bounded and stripped of control characters. Fetcher.Bounds cap what one
// repository costs: bytes received (every HTTP response byte, and the pack over any
// transport), objects, one object's inflated size (read from the pack's headers as it
// streams, before go-git inflates anything), the bytes of a checkout (summed from object
// headers before a file is written), and each team's share of the cache, past which the
// team's own least recently used trees are evicted. Trees are cached per team so no team
// reads what another team's fetch wrote; the cache is private (directories 0700, files 0600,
// whatever the umask). Not bounded here: the ref advertisement over ssh and git:// (only
// Timeout), and go-git's delta cache while it indexes a pack (up to 96 MiB per fetch in
// flight; each object in it is within MaxFileBytes).
package appsource
