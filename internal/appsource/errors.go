package appsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// API fields an Error may name.
const (
	FieldRepoURL   = "spec.source.git.repoURL"
	FieldRevision  = "spec.source.git.revision"
	FieldPath      = "spec.source.git.path"
	FieldSecretRef = "spec.source.git.secretRef"
	FieldInline    = "spec.source.inline"
)

// Error is a failure with what a user must fix: the API field, or the file and line in the
// source. Permanent means retrying the same input gives the same failure.
type Error struct {
	Field     string // API field, e.g. spec.source.git.path
	File      string // relative to the repository root, or spec.source.inline[i]
	Line      int    // 1-based; 0 when unknown
	Permanent bool
	Err       error
}

func (e *Error) Error() string {
	var prefix string
	switch {
	case e.File != "" && e.Line > 0:
		prefix = fmt.Sprintf("%s:%d: ", e.File, e.Line)
	case e.File != "":
		prefix = e.File + ": "
	case e.Field != "":
		prefix = e.Field + ": "
	}
	if e.Err == nil {
		return prefix + "failed"
	}
	return prefix + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// IsTransient reports whether err may go away by itself (network, server down, timeout): the
// caller keeps the last good render and retries with backoff. Errors of this package decide
// by Permanent; others by their cause.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return !e.Permanent
	}
	return transientCause(err)
}

func permanent(field string, format string, args ...any) *Error {
	return &Error{Field: field, Permanent: true, Err: fmt.Errorf(format, args...)}
}

// Flags of the controller-manager that raise the bounds of a Fetcher; the error of a bound
// names its flag.
const (
	FlagMaxFetchMiB    = "--git-max-fetch-mib"
	FlagMaxObjects     = "--git-max-objects"
	FlagMaxFileMiB     = "--git-max-file-mib"
	FlagMaxCheckoutMiB = "--git-max-checkout-mib"
	FlagTeamCacheMiB   = "--git-team-cache-mib"
)

// boundError is a repository over one of the Fetcher's bounds: what was found, the bound and
// its figure, and the flag that raises it. Nothing of the fetch stays in the cache.
func boundError(what, bound string, limit int64, flag string) *Error {
	figure := sizeOf(limit)
	if flag == FlagMaxObjects {
		figure = strconv.FormatInt(limit, 10)
	}
	return permanent(FieldRepoURL, "%s, over %s (%s): nothing of it was kept; make the repository smaller, or have the platform raise the controller-manager's %s",
		what, bound, figure, flag)
}

// sizeOf writes a byte count for people.
func sizeOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// said is an error whose message is ours alone: the cause stays reachable for errors.Is and
// errors.As, but its text (which may hold what a server chose to say) is not repeated.
type said struct {
	msg   string
	cause error
}

func (e *said) Error() string { return e.msg }
func (e *said) Unwrap() error { return e.cause }

func sayf(cause error, format string, args ...any) error {
	return &said{msg: fmt.Sprintf(format, args...), cause: cause}
}

// statusText is an HTTP status as code and reason phrase, never the body.
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("HTTP %d %s", code, t)
	}
	return fmt.Sprintf("HTTP %d", code)
}

func fileError(file string, line int, format string, args ...any) *Error {
	return &Error{File: file, Line: line, Permanent: true, Err: fmt.Errorf(format, args...)}
}

// transientCause recognises failures of the network or of the server, which come back by
// themselves.
func transientCause(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if code := httpStatus(err); code != 0 {
		return code >= 500 || code == 429 || code == 408
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "connection reset", "i/o timeout", "no such host", "broken pipe", "EOF", "TLS handshake timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// httpStatus digs the status code out of go-git's HTTP error, which it hides in an
// UnexpectedError that does not unwrap.
func httpStatus(err error) int {
	var he *githttp.Err
	if errors.As(err, &he) {
		return he.StatusCode()
	}
	var ue *plumbing.UnexpectedError
	if errors.As(err, &ue) && errors.As(ue.Err, &he) {
		return he.StatusCode()
	}
	return 0
}

// isTLSFailure is a certificate the client refuses: retrying does not change it.
func isTLSFailure(err error) bool {
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	var hn x509.HostnameError
	var tv *tls.CertificateVerificationError
	return errors.As(err, &ua) || errors.As(err, &ci) || errors.As(err, &hn) || errors.As(err, &tv) ||
		strings.Contains(err.Error(), "x509: ")
}
