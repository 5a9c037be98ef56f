package analysis

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	psapi "k8s.io/pod-security-admission/api"
)

// maxResponseBytes caps what is read of a web or Prometheus answer: a metric is a small
// document, and what a tenant's template reads must not fill the controller's memory.
const maxResponseBytes = 1 << 20

// maxRedirects is how many same-host redirects a call follows.
const maxRedirects = 3

// Egress decides where the web and Prometheus providers may connect. Every connection's
// address is checked when it is dialled (in the dialer's Control function, after DNS), so a
// name that resolves to a public address at one moment and to a private one the next gains
// nothing. Refused unless allowed:
//
//   - link-local addresses (169.254.0.0/16 with the cloud metadata service 169.254.169.254,
//     fe80::/10), other well-known metadata addresses (fd00:ec2::254, 100.100.100.200),
//     unspecified (0.0.0.0/8, ::), multicast, broadcast and reserved (240.0.0.0/4) ones: for
//     every template;
//   - loopback (127.0.0.0/8, ::1) and private (10/8, 172.16/12, 192.168/16, 100.64/10,
//     fc00::/7) addresses: for a namespace's AnalysisTemplate. A ClusterAnalysisTemplate is
//     written by the platform and may reach them.
//
// Allow (the controller's --analysis-allow-cidr) permits its ranges to every template; it is
// the only way to reach link-local addresses. Requests go direct: HTTP_PROXY is ignored, since
// a proxy would make the checked address the proxy's.
type Egress struct {
	allow []netip.Prefix

	once             sync.Once
	tenant, platform *http.Transport
}

// NewEgress returns the egress rules with allow as the platform's allow-list.
func NewEgress(allow []netip.Prefix) *Egress {
	return &Egress{allow: append([]netip.Prefix(nil), allow...)}
}

// defaultEgress is what a provider without Egress uses: nothing allowed beyond the rules.
var defaultEgress = NewEgress(nil)

func egressOrDefault(e *Egress) *Egress {
	if e == nil {
		return defaultEgress
	}
	return e
}

// ParseAllowCIDRs reads --analysis-allow-cidr values.
func ParseAllowCIDRs(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("--analysis-allow-cidr %q: not a CIDR; write it like 10.0.0.0/8 or 127.0.0.1/32", s)
			}
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// addressClass names what is special about an address ("" for a public one) and whether the
// platform's templates may reach it without the allow-list.
func addressClass(a netip.Addr) (class string, platformMay bool) {
	a = a.Unmap()
	switch {
	case metadataAddresses[a]:
		return "a cloud metadata address", false
	case a.IsMulticast():
		return "multicast", false
	case a.IsLinkLocalUnicast():
		return "link-local (cloud metadata lives there)", false
	case a.IsUnspecified() || (a.Is4() && thisNetwork.Contains(a)):
		return "unspecified", false
	case a == broadcast || (a.Is4() && reserved4.Contains(a)):
		return "reserved", false
	case a.IsLoopback():
		return "loopback", true
	case a.IsPrivate() || (a.Is4() && sharedAddressSpace.Contains(a)):
		return "private", true
	}
	return "", true
}

var (
	metadataAddresses = map[netip.Addr]bool{
		netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack
		netip.MustParseAddr("fd00:ec2::254"):   true, // AWS over IPv6
		netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	}
	thisNetwork        = netip.MustParsePrefix("0.0.0.0/8")
	sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")
	reserved4          = netip.MustParsePrefix("240.0.0.0/4")
	broadcast          = netip.MustParseAddr("255.255.255.255")
)

// Check says whether a template may connect to a; platform is true for a
// ClusterAnalysisTemplate's metric. The error says why not and how to allow it.
func (e *Egress) Check(a netip.Addr, platform bool) error {
	a = a.Unmap()
	for _, p := range e.allow {
		if p.Contains(a) {
			return nil
		}
	}
	class, platformMay := addressClass(a)
	switch {
	case class == "":
		return nil
	case platform && platformMay:
		return nil
	case platformMay:
		return fmt.Errorf("%s is %s: an AnalysisTemplate of a namespace may not reach it; use a ClusterAnalysisTemplate (written by a cluster admin) or have the platform allow the range with the controller's --analysis-allow-cidr", a, class)
	}
	return fmt.Errorf("%s is %s: analysis may not reach it unless the platform allows the range with the controller's --analysis-allow-cidr", a, class)
}

// egressError is a connection the rules refused; callError reports it whole.
type egressError struct{ err error }

func (e egressError) Error() string { return e.err.Error() }

func (e *Egress) dialer(platform bool) *net.Dialer {
	return &net.Dialer{
		Timeout:   10 * time.Second,
		KeepAlive: 30 * time.Second,
		// Control runs for every address tried, after name resolution: what is checked is
		// exactly what is connected to.
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return egressError{fmt.Errorf("connecting to %s: not an IP address and port", address)}
			}
			if err := e.Check(ap.Addr(), platform); err != nil {
				return egressError{fmt.Errorf("connecting to %s: %w", address, err)}
			}
			return nil
		},
	}
}

func (e *Egress) init() {
	e.once.Do(func() {
		newTransport := func(platform bool) *http.Transport {
			return &http.Transport{
				Proxy:                  nil,
				DialContext:            e.dialer(platform).DialContext,
				ForceAttemptHTTP2:      true,
				MaxIdleConns:           100,
				MaxIdleConnsPerHost:    4,
				IdleConnTimeout:        90 * time.Second,
				TLSHandshakeTimeout:    10 * time.Second,
				ExpectContinueTimeout:  time.Second,
				MaxResponseHeaderBytes: 64 << 10,
			}
		}
		e.tenant, e.platform = newTransport(false), newTransport(true)
	})
}

// Client returns an HTTP client that dials under the rules, follows at most 3 redirects and
// only within the same host (scheme, host and port), and reads at most 1 MiB of an answer.
func (e *Egress) Client(platform bool, timeout time.Duration) *http.Client {
	e.init()
	transport := e.tenant
	if platform {
		transport = e.platform
	}
	return &http.Client{
		Timeout:       timeout,
		Transport:     limitedBodies{transport},
		CheckRedirect: sameHostRedirects,
	}
}

// sameHostRedirects follows a redirect only to the host of the first request.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return fmt.Errorf("more than %d redirects; call the final address directly", maxRedirects)
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || !strings.EqualFold(req.URL.Host, first.Host) {
		return fmt.Errorf("redirected from %s://%s to %s://%s: analysis follows redirects only within the same host; call the final address directly", first.Scheme, first.Host, req.URL.Scheme, req.URL.Host)
	}
	return nil
}

// checkScheme refuses every URL scheme but http and https before any call is made.
func checkScheme(field, address string) (*url.URL, error) {
	u, err := url.Parse(address)
	if err != nil {
		return nil, fmt.Errorf("%s: not a URL: %w", field, unwrapURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		if u.Scheme == "" {
			return nil, fmt.Errorf("%s: no scheme; write it like https://host/path", field)
		}
		return nil, fmt.Errorf("%s: scheme %q is not allowed; use http or https", field, u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%s: no host; write it like https://host/path", field)
	}
	return u, nil
}

// literalSchemeProblem checks the scheme of a URL as written, when it starts with one (a URL
// that starts with {{args.X}} is checked after substitution, when measured).
func literalSchemeProblem(field, address string) error {
	i := strings.Index(address, ":")
	if i <= 0 || strings.Contains(address[:i], "{{") {
		return nil
	}
	scheme := address[:i]
	for j, r := range scheme {
		letter := (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !letter && (j == 0 || !(r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return nil
		}
	}
	if s := strings.ToLower(scheme); s != "http" && s != "https" {
		return fmt.Errorf("%s: scheme %q is not allowed; use http or https", field, s)
	}
	return nil
}

// limitedBodies caps every answer's body at maxResponseBytes: reading past it is an error.
type limitedBodies struct{ next http.RoundTripper }

func (l limitedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxResponseBytes}
	return resp, nil
}

// errTooLarge is the error of reading past maxResponseBytes.
var errTooLarge = fmt.Errorf("the answer is larger than %d bytes (1 MiB), the most analysis reads; make the endpoint or query return less", maxResponseBytes)

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the limit from a larger one.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, errTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// CloseIdleConnections drops pooled connections (for tests and shutdown).
func (e *Egress) CloseIdleConnections() {
	e.init()
	e.tenant.CloseIdleConnections()
	e.platform.CloseIdleConnections()
}

// egressCause returns the refusal inside err, if a connection was refused by the rules.
func egressCause(err error) (error, bool) {
	var ee egressError
	if errors.As(err, &ee) {
		return ee, true
	}
	return nil, false
}

// callError describes a failed call without the URL's query (it may carry a token).
func callError(target string, err error) error {
	return fmt.Errorf("calling %s: %w", target, callCause(err))
}

// callCause is what went wrong in a call: a refused connection reads as the refusal, an
// answer past the size limit says so, and the *url.Error wrapper (which repeats the URL with
// its query) is dropped.
func callCause(err error) error {
	var refused egressError
	switch {
	case errors.As(err, &refused):
		return refused
	case errors.Is(err, errTooLarge):
		return errTooLarge
	}
	return unwrapURLError(err)
}

// Settings are the platform's analysis settings: the controller-manager's
// --analysis-allow-cidr and --analysis-pod-security-level.
type Settings struct {
	// AllowCIDRs every template may reach, link-local and private ranges included.
	AllowCIDRs []netip.Prefix
	// PodSecurity is the level the Job pods of a namespace's templates must meet.
	PodSecurity psapi.Level
}

// DefaultSettings allow no extra range and hold a namespace's Job pods to restricted.
func DefaultSettings() Settings {
	return Settings{PodSecurity: psapi.LevelRestricted}
}

// ParseSettings reads the flags' values.
func ParseSettings(allowCIDRs []string, podSecurityLevel string) (Settings, error) {
	allow, err := ParseAllowCIDRs(allowCIDRs)
	if err != nil {
		return Settings{}, err
	}
	switch level := psapi.Level(podSecurityLevel); level {
	case psapi.LevelPrivileged, psapi.LevelBaseline, psapi.LevelRestricted:
		return Settings{AllowCIDRs: allow, PodSecurity: level}, nil
	}
	return Settings{}, fmt.Errorf("--analysis-pod-security-level %q: use privileged, baseline or restricted", podSecurityLevel)
}
