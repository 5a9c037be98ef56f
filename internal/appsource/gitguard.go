package appsource

import (
	"bufio"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// go-git v5 picks a transport per scheme from a process-wide table, with no per-remote
// option; this package is the process's only go-git user, so it installs its HTTP client
// there once. What differs per call (the repository, the Team's allow check, the byte
// budget) travels in the request's context as a *call. go-git's own file transport is
// removed: a repoURL never reads the controller's disk.
func init() {
	base := http.DefaultTransport.(*http.Transport).Clone()
	c := githttp.NewClientWithOptions(&http.Client{Transport: &guardTransport{base: base}},
		// Only the ref discovery may be redirected, as git does by default; every hop is
		// checked by guardTransport before net/http follows it.
		&githttp.ClientOptions{RedirectPolicy: githttp.FollowInitialRedirects})
	client.InstallProtocol("http", c)
	client.InstallProtocol("https", c)
	client.InstallProtocol("file", nil)
}

// call is one listing or fetch of one repository: what its transport may do, and the first
// refusal, which explains whatever error go-git makes of it.
type call struct {
	repo    string // normalised repoURL
	allowed func(repoURL string) bool
	bounds  Bounds
	read    atomic.Int64 // HTTP response bytes

	mu  sync.Mutex
	err *Error
}

type callKey struct{}

func (f *Fetcher) newCall(ctx context.Context, g Git) (context.Context, *call) {
	c := &call{repo: g.RepoURL, allowed: g.Allowed, bounds: f.bounds()}
	return context.WithValue(ctx, callKey{}, c), c
}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// fail records the first refusal of the call and returns it.
func (c *call) fail(e *Error) *Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = e
	}
	return c.err
}

func (c *call) failure() *Error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// guardTransport sees every HTTP response go-git gets: it checks each redirect hop before
// net/http follows it, counts the bytes received, and drops the body of every error response
// so that no server text reaches go-git's error messages (nor memory: go-git reads an error
// body whole).
type guardTransport struct {
	base http.RoundTripper
}

func (t *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	c := callOf(req.Context())
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != "":
		if e := checkRedirect(c, req, resp.Header.Get("Location")); e != nil {
			_ = resp.Body.Close()
			if c != nil {
				e = c.fail(e)
			}
			return nil, e
		}
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		_ = resp.Body.Close()
		resp.Body, resp.ContentLength = http.NoBody, 0
		resp.Header.Del("Content-Length")
	}
	if c != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, c: c}
	}
	return resp, nil
}

// countingBody bounds the bytes one call receives over HTTP.
type countingBody struct {
	io.ReadCloser
	c *call
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if max := b.c.bounds.MaxFetchBytes; b.c.read.Add(int64(n)) > max {
		return n, b.c.fail(boundError(fmt.Sprintf("the server sent more than %s for one fetch", sizeOf(max)),
			"the bound on one fetch", max, FlagMaxFetchMiB))
	}
	return n, err
}

// servicePaths are what go-git appends to a repository URL over smart HTTP.
var servicePaths = []string{"/info/refs", "/git-upload-pack", "/git-receive-pack"}

// checkRedirect lets a redirect go only to the same scheme and host, and to a repository
// the caller allows (the Team's spec.repositories) or to the repository itself spelt with or
// without .git. Without a call (not a fetch of this package) only the latter is allowed.
func checkRedirect(c *call, req *http.Request, location string) *Error {
	from := ""
	var allowed func(string) bool
	if c != nil {
		from, allowed = c.repo, c.allowed
	} else {
		u := *req.URL
		u.RawQuery, u.Fragment = "", ""
		from, _ = NormalizeRepoURL(trimServicePath(u.String()))
	}
	refuse := func(host string) *Error {
		return permanent(FieldRepoURL, "the server of %s redirected to host %q, outside the repositories the Team allows: set repoURL to where the repository lives now, and have the platform add it to the Team's spec.repositories if it is not there",
			from, clean(host, 100))
	}
	loc, err := req.URL.Parse(location)
	if err != nil || loc.User != nil {
		return refuse("(unreadable)")
	}
	// The escaped path, so an encoded separator stays visible and is refused as such.
	target, err := NormalizeRepoURL(trimServicePath(loc.Scheme + "://" + loc.Host + loc.EscapedPath()))
	if err != nil || from == "" || origin(target) != origin(from) {
		return refuse(loc.Hostname())
	}
	if sameRepository(target, from) || (allowed != nil && allowed(target)) {
		return nil
	}
	return refuse(loc.Hostname())
}

func trimServicePath(u string) string {
	for _, s := range servicePaths {
		if strings.HasSuffix(u, s) {
			return strings.TrimSuffix(u, s)
		}
	}
	return u
}

// origin is scheme://host[:port] of a normalised URL.
func origin(normalised string) string {
	sch, rest, _ := strings.Cut(normalised, "://")
	host, _, _ := strings.Cut(rest, "/")
	return sch + "://" + host
}

func sameRepository(a, b string) bool {
	return strings.TrimSuffix(a, ".git") == strings.TrimSuffix(b, ".git")
}

// guardedStorage is go-git's filesystem storage whose pack writer is guarded: every pack a
// fetch receives (over any transport) passes packGuard on its way to disk.
type guardedStorage struct {
	*filesystem.Storage
	c *call
}

func (s guardedStorage) PackfileWriter() (io.WriteCloser, error) {
	w, err := s.Storage.PackfileWriter()
	if err != nil {
		return nil, err
	}
	return newPackGuard(w, s.c), nil
}

// packGuard reads the pack as it streams to go-git's writer and refuses it at the first
// thing over the bounds: more bytes than MaxFetchBytes, more objects than MaxObjects, or an
// object (or a delta's result) bigger than MaxFileBytes, read from the object's header before
// a byte of it is inflated. go-git's indexer would otherwise hash a blob of any size and
// resolve deltas against bases held in memory; checkout would inflate it whole.
type packGuard struct {
	w    io.WriteCloser
	c    *call
	pw   *io.PipeWriter
	done chan error
	n    int64
	err  error
}

func newPackGuard(w io.WriteCloser, c *call) *packGuard {
	pr, pw := io.Pipe()
	g := &packGuard{w: w, c: c, pw: pw, done: make(chan error, 1)}
	go func() {
		err := checkPack(bufio.NewReader(pr), c)
		if err != nil {
			pr.CloseWithError(err)
		} else {
			_, _ = io.Copy(io.Discard, pr) // the trailer, or what go-git will refuse itself
		}
		g.done <- err
	}()
	return g
}

func (g *packGuard) Write(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	g.n += int64(len(p))
	if max := g.c.bounds.MaxFetchBytes; g.n > max {
		g.err = g.c.fail(boundError(fmt.Sprintf("the server sent a pack of more than %s", sizeOf(max)),
			"the bound on one fetch", max, FlagMaxFetchMiB))
		return 0, g.err
	}
	if _, err := g.pw.Write(p); err != nil {
		g.err = err
		return 0, err
	}
	return g.w.Write(p)
}

func (g *packGuard) Close() error {
	_ = g.pw.Close()
	verr := <-g.done
	cerr := g.w.Close()
	switch {
	case g.err != nil:
		return g.err
	case verr != nil:
		return verr
	}
	return cerr
}

// Pack object types (git's pack format).
const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOFSDelta = 6
	objREFDelta = 7
)

// checkPack walks a pack's object headers, inflating each object into nothing to find the
// next. A pack cut short is left for go-git to report.
func checkPack(r *bufio.Reader, c *call) error {
	b := c.bounds
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil
	}
	if string(hdr[:4]) != "PACK" {
		return badPack(c, "it does not start with PACK")
	}
	count := binary.BigEndian.Uint32(hdr[8:])
	if int64(count) > int64(b.MaxObjects) {
		return c.fail(boundError(fmt.Sprintf("the repository sent %d objects", count), "the bound on objects", int64(b.MaxObjects), FlagMaxObjects))
	}
	var zr io.ReadCloser
	defer func() {
		if zr != nil {
			_ = zr.Close()
		}
	}()
	for i := uint32(0); i < count; i++ {
		typ, size, err := objectHeader(r)
		if err != nil {
			return eofOr(err, func() error { return badPack(c, "an object header is malformed") })
		}
		switch typ {
		case objOFSDelta:
			for j := 0; ; j++ {
				by, err := r.ReadByte()
				if err != nil {
					return eofOr(err, nil)
				}
				if by&0x80 == 0 {
					break
				}
				if j > 9 {
					return badPack(c, "a delta offset is malformed")
				}
			}
		case objREFDelta:
			if _, err := r.Discard(20); err != nil {
				return eofOr(err, nil)
			}
		case objCommit, objTree, objBlob, objTag:
			if size > b.MaxFileBytes {
				return c.fail(boundError(fmt.Sprintf("the repository holds an object (a file) of %s", sizeOf(size)), "the bound on one file", b.MaxFileBytes, FlagMaxFileMiB))
			}
		default:
			return badPack(c, fmt.Sprintf("object type %d is unknown", typ))
		}
		if zr == nil {
			zr, err = zlib.NewReader(r)
		} else {
			err = zr.(zlib.Resetter).Reset(r, nil)
		}
		if err != nil {
			return eofOr(err, func() error { return badPack(c, "an object is not zlib data") })
		}
		read := int64(0)
		if typ == objOFSDelta || typ == objREFDelta {
			// A delta's data is a little longer than its result at most (insert-only).
			if size > b.MaxFileBytes+b.MaxFileBytes/64+64 {
				return c.fail(boundError(fmt.Sprintf("the repository holds a delta of %s", sizeOf(size)), "the bound on one file", b.MaxFileBytes, FlagMaxFileMiB))
			}
			br := &countingByteReader{r: zr}
			_, err1 := readVarint(br) // the base's size
			target, err2 := readVarint(br)
			if err := errors.Join(err1, err2); err != nil {
				return eofOr(err, func() error { return badPack(c, "a delta header is malformed") })
			}
			if target > b.MaxFileBytes {
				return c.fail(boundError(fmt.Sprintf("the repository holds an object (a file) of %s", sizeOf(target)), "the bound on one file", b.MaxFileBytes, FlagMaxFileMiB))
			}
			read = br.n
		}
		n, err := io.Copy(io.Discard, io.LimitReader(zr, size-read+1))
		if err != nil {
			return eofOr(err, func() error { return badPack(c, "an object does not inflate") })
		}
		if read+n != size {
			return c.fail(permanent(FieldRepoURL, "the server of %s sent a corrupt pack: an object is not the size its header says", c.repo))
		}
	}
	return nil
}

// objectHeader reads a pack object's type and inflated size.
func objectHeader(r io.ByteReader) (int, int64, error) {
	by, err := r.ReadByte()
	if err != nil {
		return 0, 0, err
	}
	typ := int(by>>4) & 7
	size := int64(by & 15)
	shift := uint(4)
	for by&0x80 != 0 {
		if by, err = r.ReadByte(); err != nil {
			return 0, 0, err
		}
		if shift > 56 {
			return 0, 0, errors.New("size overflows")
		}
		size |= int64(by&0x7f) << shift
		shift += 7
	}
	return typ, size, nil
}

// readVarint reads a delta header's size (little-endian base 128).
func readVarint(r io.ByteReader) (int64, error) {
	var v int64
	for shift := uint(0); ; shift += 7 {
		by, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		if shift > 56 {
			return 0, errors.New("size overflows")
		}
		v |= int64(by&0x7f) << shift
		if by&0x80 == 0 {
			return v, nil
		}
	}
}

type countingByteReader struct {
	r io.Reader
	n int64
}

func (b *countingByteReader) ReadByte() (byte, error) {
	var p [1]byte
	if _, err := io.ReadFull(b.r, p[:]); err != nil {
		return 0, err
	}
	b.n++
	return p[0], nil
}

// eofOr leaves a pack cut short to go-git (the network may have failed) and reports anything
// else with bad, if given.
func eofOr(err error, bad func() error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) || bad == nil {
		return nil
	}
	return bad()
}

// badPack is a pack this package cannot read: retried, as go-git's own errors of a broken
// pack are.
func badPack(c *call, why string) error {
	return c.fail(&Error{Field: FieldRepoURL, Err: fmt.Errorf("the server of %s sent a pack that cannot be read (%s)", c.repo, why)})
}
